"""Hostile and damaged uploads, built by code (no binary blobs): zip bombs of each kind, exports
whose manifest lies or is malformed, and a damaged zip (``rel:fuzz``, ``life:import``).

Each builder returns the zip's bytes. An *export* here is a zip with a well-formed
``almanac-export.json`` (unless the builder is about the manifest), so a restore reads past the
first checks and reaches the one the archive is about."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from collections.abc import Iterable

MANIFEST = "almanac-export.json"
NOTE = "notes/2026/01/02/nte_one.md"
NOTE_TEXT = b"---\nid: nte_one\n---\nA restored heron note.\n"


def _manifest(contents: Iterable[tuple[str, bytes]], **override: object) -> bytes:
    listed = [{"path": p, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in contents]
    manifest: dict[str, object] = {
        "format": "almanac-export",
        "version": 1,
        "exported_at": "2026-01-02T00:00:00Z",
        "workspace": "hostile",
        "counts": {"notes": 1, "retired_notes": 0, "log_entries": 0, "facts": 0},
        "files": listed,
    }
    manifest.update(override)
    return json.dumps(manifest).encode()


def export(contents: dict[str, bytes], **manifest: object) -> bytes:
    """An export of ``contents`` (deflated), its manifest matching them unless ``manifest`` overrides."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
        archive.writestr(MANIFEST, _manifest(contents.items(), **manifest))
    return buffer.getvalue()


def good_export() -> bytes:
    return export({NOTE: NOTE_TEXT})


def _zeros_member(archive: zipfile.ZipFile, name: str, size: int) -> str:
    """Deflate ``size`` newlines into ``name`` without holding them; their SHA-256."""
    digest = hashlib.sha256()
    chunk = b"\n" * (1024 * 1024)
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with archive.open(info, "w", force_zip64=size > 2**31) as out:
        left = size
        while left:
            piece = chunk[: min(left, len(chunk))]
            out.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def ratio_bomb(size: int = 64 * 1024 * 1024) -> bytes:
    """An export with one note of ``size`` newlines (about a thousand to one): a few tens of
    kilobytes that unpack to ``size`` bytes; its manifest tells the truth."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        digest = _zeros_member(archive, NOTE, size)
        listed = [{"path": NOTE, "bytes": size, "sha256": digest}]
        archive.writestr(MANIFEST, _manifest([], files=listed))
    return buffer.getvalue()


def markdown_ratio_bomb(members: int, size: int) -> bytes:
    """Markdown: ``members`` notes of ``size`` newlines each, each under the per-file limit when
    ``size`` is; together past the total."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for n in range(members):
            _zeros_member(archive, f"bomb-{n:04d}.md", size)
    return buffer.getvalue()


def many_members(count: int) -> bytes:
    """Markdown: ``count`` tiny notes (stored, not deflated: each entry costs its headers only)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for n in range(count):
            archive.writestr(f"n{n}.md", b"x")
    return buffer.getvalue()


def understated_count(count: int, declared: int = 5) -> bytes:
    """:func:`many_members` whose end record says it holds only ``declared`` entries (the stdlib's
    reader goes by the directory's size, not that count)."""
    data = bytearray(many_members(count))
    at = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, at + 8, declared, declared)
    return bytes(data)


def nested_paths() -> bytes:
    """Markdown: one note 40 folders deep, one whose name is 300 bytes, one whose path is 1,200
    bytes, and one ordinary note."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("/".join(["d"] * 40) + "/deep.md", b"too deep\n")
        archive.writestr("n" * 297 + ".md", b"name too long\n")
        archive.writestr("/".join(["p" * 200] * 6) + "/long.md", b"path too long\n")
        archive.writestr("fine.md", b"A fine wombat note.\n")
    return buffer.getvalue()


def _patch_sizes(data: bytes, name: str, size: int) -> bytes:
    """``data`` (a zip) with the uncompressed size of ``name`` rewritten to ``size`` in both its
    local header and its central directory entry (the CRC and the data left as they are)."""
    out = bytearray(data)
    encoded = name.encode()
    at = out.find(b"PK\x03\x04")
    while at >= 0:  # local headers: size at +22
        if out[at + 30 : at + 30 + len(encoded)] == encoded:
            struct.pack_into("<I", out, at + 22, size)
        at = out.find(b"PK\x03\x04", at + 4)
    at = out.find(b"PK\x01\x02")
    while at >= 0:  # central directory: size at +24
        if out[at + 46 : at + 46 + len(encoded)] == encoded:
            struct.pack_into("<I", out, at + 24, size)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def lying_size(real: int = 64 * 1024 * 1024, declared: int = 100) -> bytes:
    """An export whose note unpacks to ``real`` bytes while the zip and the manifest both declare
    ``declared``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _zeros_member(archive, NOTE, real)
        listed = [{"path": NOTE, "bytes": declared, "sha256": hashlib.sha256(b"\n" * declared).hexdigest()}]
        archive.writestr(MANIFEST, _manifest([], files=listed))
    return _patch_sizes(buffer.getvalue(), NOTE, declared)


def crc_error() -> bytes:
    """A good export with one byte of the note's (stored) data changed: its CRC no longer matches."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(NOTE, NOTE_TEXT)
        archive.writestr(MANIFEST, _manifest([(NOTE, NOTE_TEXT)]))
    data = bytearray(buffer.getvalue())
    at = data.find(b"heron")
    data[at] = ord("H")
    return bytes(data)


def files_not_a_list() -> bytes:
    """An export whose manifest says ``"files": "x"``."""
    return export({NOTE: NOTE_TEXT}, files="x")


def file_folder_collision() -> bytes:
    """An export holding ``notes/a.md`` as a file and as a folder (``notes/a.md/b.md``)."""
    return export({"notes/a.md": b"a file\n", "notes/a.md/b.md": b"and a folder\n"})


def markdown_collision() -> bytes:
    """Markdown: ``a.md`` and ``a.md/b.md`` (a file and a folder of one name)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.md", b"The file ibis.\n")
        archive.writestr("a.md/b.md", b"The folder ibis.\n")
    return buffer.getvalue()


def truncated() -> bytes:
    """A good export cut short: its directory is gone."""
    data = good_export()
    return data[: len(data) // 2]


#: The damaged uploads a client may send, each with a few words its refusal must say.
DAMAGED = {
    "crc": (crc_error, "damaged"),
    "files": (files_not_a_list, "'files' must be a list"),
    "collision": (file_folder_collision, "a file and a folder"),
}
