"""Each bench's own section of ``docs/benchmarks.md``: replaced in place, every other left alone.

A section sits between its bench's HTML-comment markers (``<!-- name:start -->`` …
``<!-- name:end -->``). Where the markers are missing, a section that starts with the bench's
heading (``heading``) runs to the next heading or marker comment of another section; otherwise the
section is appended.
"""

from __future__ import annotations

import re
from pathlib import Path


def replace_section(path: Path, start: str, end: str, section: str, heading: str | None = None) -> None:
    block = f"{start}\n{section.strip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    marked = re.compile(re.escape(start) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    bare = None
    if heading is not None:
        bare = re.compile(re.escape(heading) + r"\n.*?(?=^## |^<!-- |\Z)", re.DOTALL | re.MULTILINE)
    if marked.search(text):
        text = marked.sub(lambda _: block, text, count=1)
    elif bare is not None and bare.search(text):
        text = bare.sub(lambda _: block + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
