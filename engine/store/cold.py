"""The cold-storage banner (pure, ``life:archive``): the first lines of every archived note's body.

::

    > **⚠️ From cold storage — this was true at one time, but it may not be true now.**
    > Archived 2026-08-28T19:30:00.000000Z; unverified since. Reason: decayed out (score 0.198 after 141d).

The sweep writes it into the file when it archives a note (:mod:`engine.ageing.archive`). A note
that reaches ``archive/`` without it — a file moved there by hand — is given one when the store
reads it (:func:`bannered`), in memory only: the file is the owner's and is left as it is, while
everything that reads the note (the index and so ``get_context``, the dashboard, exports) carries
the banner. ``restore_memory`` takes it off (:func:`without_banner`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from engine.store.model import Note, format_time

BANNER = "> **⚠️ From cold storage — this was true at one time, but it may not be true now.**"
_SECOND = "> Archived {when}; unverified since. Reason: {reason}."
_BY_HAND = "> Archived by hand{since}. Reason: moved into archive/ without a banner."


def has_banner(body: str) -> bool:
    return body.split("\n", 1)[0] == BANNER


def with_banner(body: str, when: datetime, reason: str) -> str:
    """``body`` with the cold-storage banner as its first lines (an old banner is replaced)."""
    head = f"{BANNER}\n{_SECOND.format(when=format_time(when), reason=reason)}\n\n"
    return head + without_banner(body)


def without_banner(body: str) -> str:
    """``body`` with a leading cold-storage banner (and the blank line after it) taken off."""
    lines = body.split("\n")
    if not lines or lines[0] != BANNER:
        return body
    at = 1
    while at < len(lines) and lines[at].startswith(">"):
        at += 1
    if at < len(lines) and not lines[at].strip():
        at += 1
    return "\n".join(lines[at:])


def bannered(note: Note) -> Note:
    """An archived note as it is read: with its banner; one moved by hand without a banner gets
    one that says so, unverified since the note last changed."""
    if has_banner(note.body):
        return note
    last = note.updated or note.created
    since = f"; unverified since {format_time(last)}" if last is not None else "; unverified since"
    return replace(note, body=f"{BANNER}\n{_BY_HAND.format(since=since)}\n\n{note.body}")
