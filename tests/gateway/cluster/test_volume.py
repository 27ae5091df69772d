"""A node's volume identity (``run:scale-out``): which volumes a node takes as its own, and the
identity file itself (written durably once, never replaced, a damaged one refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cluster.fencing import Fence
from gateway.cluster.volume import VOLUME_FILE, decide, read_identity, write_identity
from gateway.errors import DataDirError


@pytest.mark.req("run:scale-out")
def test_a_node_takes_a_volume_as_its_own_only_when_nothing_can_be_served_empty() -> None:
    assert decide("v1", "v1", placed=3).adopt
    assert decide(None, None, placed=3).adopt  # first start: nothing recorded yet
    assert decide(None, "v9", placed=3).adopt
    assert decide("v1", None, placed=0).adopt  # nothing placed on it: nothing to serve empty
    empty = decide("v1", None, placed=3)
    swapped = decide("v1", "v2", placed=3)
    assert not empty.adopt and "empty volume" in empty.reason
    assert not swapped.adopt and "another volume (v2)" in swapped.reason


@pytest.mark.req("run:scale-out")
def test_the_identity_is_written_once_and_a_damaged_one_refused(tmp_path: Path) -> None:
    assert read_identity(tmp_path) is None
    identity = write_identity(tmp_path)
    assert read_identity(tmp_path) == identity
    with pytest.raises(DataDirError):  # never replaced
        write_identity(tmp_path)
    assert read_identity(tmp_path) == identity
    (tmp_path / VOLUME_FILE).write_text("not an identity!\n")
    with pytest.raises(DataDirError, match="not a volume identity"):
        read_identity(tmp_path)
    (tmp_path / VOLUME_FILE).write_bytes(b"a" * 1000)
    with pytest.raises(DataDirError, match="not a volume identity"):
        read_identity(tmp_path)


@pytest.mark.req("run:scale-out")
def test_the_fence_serves_only_within_a_renewed_lease_and_after_the_predecessors() -> None:
    now = [100.0]
    fence = Fence(lease=10.0, generation=2, not_before=1_000.0, retry_after=5.0, monotonic=lambda: now[0])
    assert fence.refusal(999.0) is not None  # the previous process's leases still run
    refused = fence.refusal(999.0)
    assert refused is not None and refused[1] == pytest.approx(1.0)
    assert fence.refusal(1_001.0) is not None  # never renewed yet
    fence.record_renewal(began=100.0)
    assert fence.refusal(1_001.0) is None
    now[0] = 109.9
    assert fence.refusal(1_001.0) is None
    now[0] = 110.0  # the lease of its last renewal has run out
    assert fence.refusal(1_001.0) is not None
    fence.record_renewal(began=110.0)
    assert fence.refusal(1_001.0) is None
    fence.name_taken = True
    assert fence.refusal(1_001.0) is not None
