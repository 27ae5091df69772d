"""Uploads for an import: a request body read under a byte limit, and picked files bundled as a zip.

The gateway checks nothing inside a zip: the engine does (path escapes, symbolic links, binary,
oversized and non-Markdown files are skipped there with the reason), so the same rules hold for a
zip, picked files, the REST API and the command line.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator, Sequence
from pathlib import PurePosixPath

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.types import Message

from gateway.errors import PayloadTooLarge

CHUNK = 64 * 1024


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the upload is larger than this server accepts ({size_text(limit)}); import it in smaller parts "
        "(or ask the operator to raise import_max_bytes). Nothing was imported."
    )


def size_text(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def capped(request: Request, limit: int) -> Request:
    """The same request, whose body raises :class:`PayloadTooLarge` past ``limit`` bytes (a declared
    ``Content-Length`` over the limit is refused before anything is read)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    receive, seen = request.receive, 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(limit)
        return message

    return Request(request.scope, counted)


def relative_names(names: Sequence[str]) -> list[str]:
    """Picked files' names as paths inside the import: a folder picked whole arrives as
    ``folder/sub/file.md`` for every file, and that shared first folder is dropped."""
    parts = [PurePosixPath(name.replace("\\", "/")).parts for name in names]
    tops = {p[0] for p in parts if p}
    if len(tops) == 1 and all(len(p) > 1 for p in parts):
        return ["/".join(p[1:]) for p in parts]
    return list(names)


def bundle(files: Sequence[tuple[str, bytes]]) -> bytes:
    """Picked files (name, content) as one zip, names kept as given (the engine judges them)."""
    names = relative_names([name for name, _ in files])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, (_, data) in zip(names, files, strict=True):
            archive.writestr(zipfile.ZipInfo(name), data)
    return buffer.getvalue()


async def chunks_of(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), CHUNK):
        yield data[start : start + CHUNK]


async def chunks_from(upload: UploadFile) -> AsyncIterator[bytes]:
    """An uploaded file, read in chunks (it may have been spooled to disk)."""
    await upload.seek(0)
    while chunk := await upload.read(CHUNK):
        yield chunk
