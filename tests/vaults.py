"""A small Obsidian-style vault as a zip, for import tests on both sides of the wire: frontmatter,
wikilinks, a subfolder, and files an import must skip (each with the reason it is given)."""

from __future__ import annotations

import io
import stat
import zipfile

#: Markdown files that become notes: relative path → content.
NOTES = {
    "Welcome.md": "---\ntags: [intro]\n---\nThe vault's home. See [[Projects/Fjord]] and [[Reading list]].\n",
    "Projects/Fjord.md": (
        "---\ntitle: Fjord\naliases: [fjord-db]\n---\n"
        "Fjord moves its database from MySQL to Postgres in May. Owner: [[People/Ines]].\n"
    ),
    "People/Ines.md": "Ines Duarte runs the Fjord migration; she prefers morning meetings.\n",
    "Reading list.markdown": "- Designing Data-Intensive Applications\n- [[Projects/Fjord]] notes\n",
}

#: Entries that are skipped: name in the zip → a word the skip reason contains.
SKIPPED = {
    "../escape.md": "outside",
    "Attachments/diagram.png": "not Markdown",
    ".obsidian/workspace.md": "hidden",
    "Broken.md": "binary",
    "link.md": "symbolic link",
}


def vault_zip() -> bytes:
    """The vault as zip bytes (NOTES plus every entry of SKIPPED)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in NOTES.items():
            archive.writestr(name, text)
        archive.writestr("../escape.md", "I would land outside the target folder.\n")
        archive.writestr("Attachments/diagram.png", b"\x89PNG\r\n\x1a\n\x00\x00")
        archive.writestr(".obsidian/workspace.md", "{}\n")
        archive.writestr("Broken.md", b"binary \x00\x01\x02 not text")
        link = zipfile.ZipInfo("link.md")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    return buffer.getvalue()


def many_notes_zip(count: int) -> bytes:
    """A zip of ``count`` small Markdown notes in a few folders (a large import)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for i in range(count):
            archive.writestr(
                f"Batch {i % 10}/Note {i:04d}.md", f"Imported note number {i} about kelp farm {i}.\n"
            )
    return buffer.getvalue()
