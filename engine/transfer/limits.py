"""How much an import or a restore may unpack, and the bounded reads that hold it to that
(``rel:fuzz``, ``life:import``).

A zip of a few hundred kilobytes can unpack to gigabytes (a "zip bomb": members that compress a
thousand to one, or thousands of members, or a member whose header lies about its size). So
nothing here trusts a size an archive declares: every member is streamed in chunks, counted as
it arrives, and refused the moment it passes

- :attr:`Limits.file_bytes`, the most one file may hold — the index's own limit
  (``--index-max-bytes``, 1,000,000 bytes by default): a memory larger than that would not be
  indexed anyway. A restore applies it to note files; the files an engine appends to over time
  (the facts ledger, day logs, the retrieval log and citation journal) hold many memories, and
  only the total bounds them;
- :attr:`Limits.total_bytes`, the most the whole import may unpack (``--import-max-bytes``, the
  gateway's ``import_max_unpacked_bytes``);
- :attr:`Limits.members`, the most entries an archive may list (counted from the zip's end
  record, before its directory is read), and :data:`MAX_PATH_BYTES` / :data:`MAX_PATH_PARTS` for
  a member's path.

Every refusal is a :class:`~engine.errors.BadImport` that names the member and the limit; the
callers stage what they write and move it into place only at the end, so a refusal leaves
nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, TypeVar

from engine.errors import BadImport, ImportStopped
from engine.index.indexer import MAX_ITEM_BYTES

#: The default of :attr:`Limits.total_bytes`.
MAX_TOTAL_BYTES: Final = 256 * 1024 * 1024
#: The default of :attr:`Limits.members`.
MAX_MEMBERS: Final = 100_000
#: A member's path: at most this many bytes (UTF-8) and folders deep.
MAX_PATH_BYTES: Final = 1024
MAX_PATH_PARTS: Final = 32
#: One file or folder name (what a Linux file system takes).
MAX_NAME_BYTES: Final = 255
CHUNK: Final = 64 * 1024
#: An end record is in the last 22 bytes of a zip, plus up to 64 KiB of comment.
_EOCD_SEARCH: Final = 22 + 65_535

T = TypeVar("T")

#: What a damaged zip raises while a member is read (bad CRC, truncated or undecodable data, an
#: unsupported compression method, a password).
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError)


class FileTooLarge(BadImport):
    """One member passed its cap (code ``bad_import``, like every refusal of an import)."""


@dataclass(frozen=True)
class Limits:
    file_bytes: int = MAX_ITEM_BYTES
    total_bytes: int = MAX_TOTAL_BYTES
    members: int = MAX_MEMBERS


#: The limits when none are given (the engine's composition root passes its own).
DEFAULT: Final = Limits()


def mib(n: int) -> str:
    """``n`` bytes for a message: ``268,435,456 bytes (256 MiB)``, or ``1,000,000 bytes``."""
    exact = n >= 1024 * 1024 and n % (1024 * 1024) == 0
    return f"{n:,} bytes ({n // (1024 * 1024):,} MiB)" if exact else f"{n:,} bytes"


class Budget:
    """What an import has unpacked so far, against :attr:`Limits.total_bytes`; and whether the
    engine has begun to stop (``stopping``), which abandons the import at its next chunk."""

    def __init__(self, limits: Limits, stopping: threading.Event | None = None) -> None:
        self.limits = limits
        self.stopping = stopping
        self.used = 0

    def take(self, size: int, name: str) -> None:
        if self.stopping is not None and self.stopping.is_set():
            raise ImportStopped(
                "the engine is stopping (its gateway went away or asked it to), so the import was "
                "abandoned whole; nothing was written — send it again"
            )
        self.used += size
        if self.used > self.limits.total_bytes:
            raise BadImport(
                f"the upload unpacks to more than {mib(self.limits.total_bytes)} (counting {name}); "
                "that is the most one import may hold — split it, or ask the operator to raise "
                "import_max_unpacked_bytes; nothing was written"
            )


def check_members(count: int, limits: Limits) -> None:
    if count > limits.members:
        raise BadImport(
            f"the zip lists {count:,} entries; an import takes at most {limits.members:,}; "
            "nothing was written"
        )


def zip_entry_count(path: Path, most: int) -> int:
    """How many entries the zip at ``path`` holds, counted in its central directory without
    building anything for them (the count stops past ``most``), and never fewer than its end
    record declares; ``BadImport`` when it has no end record or its directory is damaged.

    The stdlib's reader makes an object for every entry the directory holds, whatever the end
    record declares, so the count is taken here first."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - _EOCD_SEARCH)
            handle.seek(start)
            tail = handle.read()
            at = tail.rfind(b"PK\x05\x06")
            if at < 0 or len(tail) - at < 22:
                raise BadImport("the upload is not a zip file (it has no end record); nothing was written")
            declared = int.from_bytes(tail[at + 10 : at + 12], "little")
            directory = int.from_bytes(tail[at + 12 : at + 16], "little")
            end = start + at  # where the directory ends (before a zip64 record, when there is one)
            locator = at - 20
            if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
                handle.seek(int.from_bytes(tail[locator + 8 : locator + 16], "little"))
                record = handle.read(56)
                if record[:4] != b"PK\x06\x06" or len(record) < 48:
                    raise BadImport("the zip's zip64 end record is damaged; nothing was written")
                declared = int.from_bytes(record[32:40], "little")
                directory = int.from_bytes(record[40:48], "little")
                end = start + locator - 56
            if declared > most:
                return declared
            return max(declared, _walk(handle, end - directory, end, most))
    except OSError as exc:
        raise BadImport(f"the zip cannot be read ({exc}); nothing was written") from None


def _walk(handle: IO[bytes], first: int, end: int, most: int) -> int:
    """Entries of the central directory from ``first`` to ``end``, counted up to ``most + 1``."""
    if first < 0:
        raise BadImport("the zip's directory is damaged (it starts before the file); nothing was written")
    count, at = 0, first
    while at < end and count <= most:
        handle.seek(at)
        header = handle.read(46)
        if len(header) < 46 or header[:4] != b"PK\x01\x02":
            raise BadImport("the zip's directory is damaged; nothing was written")
        sizes = [int.from_bytes(header[k : k + 2], "little") for k in (28, 30, 32)]
        at += 46 + sum(sizes)
        count += 1
    return count


def path_problem(name: str) -> str | None:
    """Why ``name`` is too long or too deep for a member's path, or None."""
    if len(name.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return f"its path is longer than {MAX_PATH_BYTES:,} bytes"
    if name.count("/") >= MAX_PATH_PARTS:
        return f"its path is more than {MAX_PATH_PARTS} folders deep"
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in name.split("/")):
        return f"a name in its path is longer than {MAX_NAME_BYTES} bytes"
    return None


def stream(
    name: str,
    opener: Callable[[], IO[bytes]],
    cap: int,
    budget: Budget,
    sink: Callable[[bytes], object] | None = None,
    *,
    over: Callable[[int], str] | None = None,
) -> tuple[int, str]:
    """Read the member ``name`` in chunks into ``sink``: (its size, its SHA-256). ``BadImport``
    the moment it passes ``cap`` bytes (``over(cap)`` says why, default: the per-file limit) or the
    import's total, or when the archive is damaged."""
    digest = hashlib.sha256()
    size = 0
    with _read_or_refuse(name, opener) as handle:
        while chunk := _read_or_refuse(name, lambda: handle.read(CHUNK)):
            size += len(chunk)
            if size > cap:
                why = over(cap) if over else f"it is larger than {mib(cap)}, the most one file may hold"
                raise FileTooLarge(f"{name}: {why}; nothing was written")
            budget.take(len(chunk), name)
            digest.update(chunk)
            if sink is not None:
                sink(chunk)  # a failure to write is the store's, not the upload's: it propagates
    return size, digest.hexdigest()


def _read_or_refuse(name: str, step: Callable[[], T]) -> T:
    """``step()`` (opening or reading a member); a damaged archive's errors as :class:`BadImport`."""
    try:
        return step()
    except (*DAMAGED, OSError) as exc:
        raise BadImport(
            f"{name} cannot be read from the upload ({exc}): a damaged upload; nothing was written"
        ) from None


def read(name: str, opener: Callable[[], IO[bytes]], cap: int, budget: Budget) -> bytes:
    """The member ``name`` whole, read as :func:`stream` reads it (at most ``cap`` bytes)."""
    parts: list[bytes] = []
    stream(name, opener, cap, budget, parts.append)
    return b"".join(parts)


def collisions(paths: list[str]) -> tuple[str, str] | None:
    """Two of ``paths`` where one would be a file and a folder at once (``a.md`` and ``a.md/b``),
    or the same path twice; None when there are none."""
    files: dict[str, str] = {}
    for path in paths:
        if path in files:
            return files[path], path
        files[path] = path
    for path in paths:
        parts = path.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            if folder in files:
                return folder, path
    return None
