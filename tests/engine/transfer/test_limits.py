"""Imports and restores are bounded (``rel:fuzz``, ``life:import``): every hostile archive of
``tests/hostile_archives.py`` is refused (or its bad members skipped) with a message that names
what is wrong, in bounded time and memory, and nothing is written — not a file of the store, not a
staging folder."""

from __future__ import annotations

import io
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import BadImport
from engine.store.workspace import Workspace
from engine.transfer import archive, markdown
from engine.transfer.limits import DEFAULT, Limits
from tests import hostile_archives
from tests.engine.support import snapshot

BOUND_S = 30.0
BOUND_BYTES = 32 * 1024 * 1024


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(tmp_path / "ws")
    workspace.open()
    yield workspace
    workspace.close()


def upload(tmp_path: Path, data: bytes, name: str = "upload.zip") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def bounded(work: Callable[[], Any]) -> Any:
    """Run ``work`` and check it stayed within the time and memory bounds."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        return work()
    finally:
        took = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert took < BOUND_S, f"took {took:.1f} s"
        assert peak < BOUND_BYTES, f"peaked at {peak / 2**20:.0f} MiB"


def untouched(ws: Workspace) -> None:
    assert snapshot(ws.root) == {}
    assert [p.name for p in ws.root.iterdir() if p.name.startswith(".transfer")] == []


def restore_refused(ws: Workspace, source: Path, limits: Limits = DEFAULT) -> str:
    """Both entry points refuse: the check before the stream, and the restore itself."""
    messages = []
    for attempt in (
        lambda: archive.check_restore(ws, source, limits),
        lambda: archive.restore(ws, source, out=io.StringIO(), limits=limits),
    ):
        with pytest.raises(BadImport) as caught:
            bounded(attempt)
        messages.append(caught.value.message)
        untouched(ws)
    return messages[1]


@pytest.mark.req("rel:fuzz", "life:import")
def test_a_note_that_unpacks_past_the_per_file_limit_is_refused_before_writing(
    ws: Workspace, tmp_path: Path
) -> None:
    source = upload(tmp_path, hostile_archives.ratio_bomb())
    assert source.stat().st_size < 200_000  # 64 MiB in a few tens of kilobytes
    message = restore_refused(ws, source)
    assert hostile_archives.NOTE in message and "67,108,864 bytes" in message and "1,000,000 bytes" in message


@pytest.mark.req("rel:fuzz", "life:import")
def test_a_member_whose_declared_size_lies_is_read_no_further_than_declared(
    ws: Workspace, tmp_path: Path
) -> None:
    message = restore_refused(ws, upload(tmp_path, hostile_archives.lying_size()))
    assert hostile_archives.NOTE in message and "damaged" in message


@pytest.mark.req("rel:fuzz", "life:import")
def test_markdown_past_the_total_is_refused_before_writing(ws: Workspace, tmp_path: Path) -> None:
    source = upload(tmp_path, hostile_archives.markdown_ratio_bomb(members=12, size=999_000))
    limits = Limits(total_bytes=8_000_000)
    with pytest.raises(BadImport, match=r"unpacks to more than 8,000,000 bytes") as caught:
        bounded(lambda: markdown.check_source(source, limits))
    assert "import_max_unpacked_bytes" in caught.value.message
    with pytest.raises(BadImport, match=r"unpacks to more than"):
        bounded(lambda: markdown.import_markdown(ws, source, "Bomb", out=io.StringIO(), limits=limits))
    untouched(ws)
    # within the total, each file is taken (each under the per-file limit)
    done = markdown.import_markdown(
        ws, source, "Bomb", out=io.StringIO(), limits=Limits(total_bytes=12_000_000)
    )
    assert len(done.imported) == 12 and not done.skipped


@pytest.mark.req("rel:fuzz", "life:import")
def test_a_zip_listing_too_many_entries_is_refused_from_its_end_record(ws: Workspace, tmp_path: Path) -> None:
    source = upload(tmp_path, hostile_archives.many_members(1_001))
    with pytest.raises(BadImport, match=r"lists 1,001 entries; an import takes at most 1,000"):
        markdown.import_markdown(ws, source, "Many", out=io.StringIO(), limits=Limits(members=1_000))
    untouched(ws)
    done = markdown.import_markdown(ws, source, "Many", out=io.StringIO(), limits=Limits(members=1_001))
    assert len(done.imported) == 1_001


@pytest.mark.req("rel:fuzz")
def test_an_end_record_that_understates_the_entries_does_not_hide_them(ws: Workspace, tmp_path: Path) -> None:
    source = upload(tmp_path, hostile_archives.understated_count(1_001))
    with pytest.raises(BadImport, match=r"lists 1,001 entries; an import takes at most 1,000"):
        markdown.import_markdown(ws, source, "Many", out=io.StringIO(), limits=Limits(members=1_000))
    untouched(ws)


@pytest.mark.req("rel:fuzz", "life:import")
def test_paths_too_deep_or_too_long_are_skipped_with_the_reason(ws: Workspace, tmp_path: Path) -> None:
    done = markdown.import_markdown(
        ws, upload(tmp_path, hostile_archives.nested_paths()), "Paths", out=io.StringIO()
    )
    assert [str(p) for p in done.imported] == ["notes/Imported/Paths/fine.md"]
    reasons = sorted(s.reason for s in done.skipped)
    assert len(reasons) == 3
    assert any("folders deep" in r for r in reasons) and any("longer than 255 bytes" in r for r in reasons)
    assert any("longer than 1,024 bytes" in r for r in reasons)


@pytest.mark.req("rel:fuzz", "life:import")
@pytest.mark.parametrize("kind", sorted(hostile_archives.DAMAGED))
def test_a_damaged_export_is_a_bad_import_that_says_what_is_wrong(
    ws: Workspace, tmp_path: Path, kind: str
) -> None:
    build, words = hostile_archives.DAMAGED[kind]
    assert words in restore_refused(ws, upload(tmp_path, build()))


def test_a_truncated_zip_is_not_taken_for_a_zip(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(BadImport, match="neither a folder nor a zip"):
        archive.restore(ws, upload(tmp_path, hostile_archives.truncated()), out=io.StringIO())
    untouched(ws)


@pytest.mark.req("life:import")
def test_a_file_and_folder_of_one_name_in_markdown_keeps_the_first(ws: Workspace, tmp_path: Path) -> None:
    done = markdown.import_markdown(
        ws, upload(tmp_path, hostile_archives.markdown_collision()), "Ibis", out=io.StringIO()
    )
    assert [str(p) for p in done.imported] == ["notes/Imported/Ibis/a.md"]
    assert [(s.path, "name of one of its folders" in s.reason) for s in done.skipped] == [("a.md/b.md", True)]


@pytest.mark.req("life:import")
def test_a_good_export_still_restores(ws: Workspace, tmp_path: Path) -> None:
    source = upload(tmp_path, hostile_archives.good_export())
    archive.check_restore(ws, source)
    archive.restore(ws, source, out=io.StringIO())
    assert (ws.root / hostile_archives.NOTE).read_bytes() == hostile_archives.NOTE_TEXT


class _Unnamed(zipfile.ZipInfo):
    """A member whose name is empty (``ZipInfo.is_dir`` fails on one, so the writer is told)."""

    def is_dir(self) -> bool:
        return False


def _unnamed_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as made:
        made.writestr("a.md", "# kept\n")
        made.writestr(_Unnamed(""), "# no name\n")
    return buffer.getvalue()


@pytest.mark.req("rel:fuzz", "life:import")
def test_a_member_with_no_name_is_skipped_or_refused_cleanly(ws: Workspace, tmp_path: Path) -> None:
    """A zip member with an empty name (a fuzzed export had one): a Markdown import skips it with
    the reason and imports the rest; a restore is refused, nothing written."""
    report = markdown.import_markdown(ws, upload(tmp_path, _unnamed_zip()), "Unnamed", out=io.StringIO())
    assert [s.reason for s in report.skipped] == ["a member of the zip has no name"]
    assert [str(p) for p in report.imported] == ["notes/Imported/Unnamed/a.md"]
    other = Workspace(tmp_path / "other")
    other.open()
    try:
        restore_refused(other, upload(tmp_path, _unnamed_zip(), "restore.zip"))
    finally:
        other.close()


GOOD = hostile_archives.good_export()


@pytest.mark.req("rel:fuzz")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 255)), min_size=1, max_size=4))
def test_any_corruption_of_an_export_is_refused_cleanly_or_restores_it_whole(
    tmp_path_factory: pytest.TempPathFactory, flips: list[tuple[int, int]]
) -> None:
    damaged = bytearray(GOOD)
    for at, value in flips:
        damaged[at] = value
    tmp = tmp_path_factory.mktemp("fuzz")
    ws = Workspace(tmp / "ws")
    ws.open()
    try:
        source = upload(tmp, bytes(damaged))
        try:
            archive.restore(ws, source, out=io.StringIO())
        except BadImport:
            untouched(ws)
        else:
            assert (ws.root / hostile_archives.NOTE).read_bytes() == hostile_archives.NOTE_TEXT
    finally:
        ws.close()
