"""A hostile store, built by code: note files and a ledger segment whose YAML would cost minutes
of CPU and gigabytes of memory to expand (``rel:fuzz``), each beside a body that must stay
searchable. Used by the store's unit tests and by the tests that start real engines on it."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: One ordinary note and one ordinary fact, to show the rest of the store still loads.
PLAIN_NOTE = (
    "notes/2026/01/02/nte_plain.md",
    "---\nid: nte_plain\ncreated: '2026-01-02T10:00:00.000000Z'\ntags: [ok]\n---\nA plain quokka note.\n",
)


def alias_bomb(levels: int = 8, width: int = 9) -> str:
    """A YAML mapping whose last key stands for ``width ** levels`` strings (≈ 43 million for the
    default), in about 400 bytes: each level is a list of ``width`` aliases of the level before."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines)


def deep_nesting(levels: int = 900) -> str:
    """A list nested ``levels`` deep (libyaml accepts up to 1,000; Python walks recurse per level)."""
    return "deep: " + "[" * levels + "]" * levels


def recursive_alias() -> str:
    """A list that contains itself: any walk of it never ends."""
    return "self: &self [*self, 1]"


def huge_frontmatter(chars: int = 2 * 1024 * 1024) -> str:
    """Plain YAML, but megabytes of it."""
    line = "key_{n:07d}: " + "x" * 40
    count = chars // (len(line.format(n=0)) + 1) + 1
    return "\n".join(line.format(n=n) for n in range(count))


@dataclass(frozen=True)
class HostileNote:
    path: str  # relative to the workspace
    word: str  # a word only its body has
    front: str  # the frontmatter's YAML

    @property
    def text(self) -> str:
        return f"---\n{self.front}\n---\nThe {self.word} is in this note's body.\n"


NOTES = (
    HostileNote("notes/2026/01/03/bomb.md", "axolotl", alias_bomb()),
    HostileNote("notes/2026/01/03/deep.md", "pangolin", deep_nesting()),
    HostileNote("notes/2026/01/03/loop.md", "narwhal", recursive_alias()),
    HostileNote("notes/2026/01/03/huge.md", "okapi", huge_frontmatter()),
)

LEDGER = "facts/2026-01.md"
GOOD_EVENT = (
    "## evt_01KE0000000000000000000001 store\n\n```yaml\ntime: '2026-01-02T10:00:00.000000Z'\n"
    "memory: fct_00000000000000000001\nsubject: Fjord\npredicate: database\nobject: Postgres\n```\n\n"
)
BOMB_EVENT = (
    "## evt_01KE0000000000000000000002 store\n\n```yaml\ntime: '2026-01-02T11:00:00.000000Z'\n"
    "memory: fct_00000000000000000002\nsubject: Billion\npredicate: laughs\nobject: haha\n"
    + alias_bomb()
    + "\n```\n\n"
)


def files() -> dict[str, str]:
    """Every file of the hostile store: relative path → text."""
    out = {PLAIN_NOTE[0]: PLAIN_NOTE[1], LEDGER: "# Facts ledger — 2026-01\n\n" + GOOD_EVENT + BOMB_EVENT}
    out.update({n.path: n.text for n in NOTES})
    return out


def write(root: Path) -> dict[str, bytes]:
    """Write the hostile store into ``root``; returns what was written (path → bytes)."""
    written: dict[str, bytes] = {}
    for rel, text in files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written[rel] = text.encode()
    return written


def markdown_zip() -> bytes:
    """The hostile notes as a Markdown zip (an Obsidian vault someone sends): relative paths
    ``bomb.md``, ``deep.md``, …"""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for note in NOTES:
            archive.writestr(Path(note.path).name, note.text)
    return buffer.getvalue()
