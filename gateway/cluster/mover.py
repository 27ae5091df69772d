"""``almanac workspace move WS --to NODE`` (issue 15 item 3): the steps, in order, each one a signed
call to a node's :mod:`gateway.cluster.moves` endpoints over HTTP (the nodes may be on different
hosts) or one row change in the control plane:

1. mark the placement as moving: every node answers the workspace's calls 503 ``workspace_moving``
   with a short ``Retry-After``;
2. the source node releases it: refuses it locally at once, lets the calls in flight finish, stops
   its engine, and lists its files with their SHA-256;
3. the target node pulls every file from the source, checks each one, and lists what it now has;
   the two lists must be the same, file by file;
4. flip the placement to the target;
5. the target starts the workspace's engine on the copy (it serves it);
6. only then the source deletes its old copy.

Anything failing before the flip calls the move off (the target's partial copy is discarded, the
source serves the workspace again); nothing is deleted before the target has served the copy.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from gateway.cluster import manifest, signing
from gateway.cluster.placement import Node, Placement, is_live
from gateway.errors import BadRequest, MoveFailed

_TIMEOUT = httpx.Timeout(30.0, read=600.0)
#: How long the target node is asked to start the moved workspace before the move gives up (seconds).
OPEN_DEADLINE_S = 120.0


class _Plane(Protocol):
    def nodes(self) -> list[Node]: ...
    def placement(self, workspace_id: str) -> Placement | None: ...
    def place_on(self, workspace_id: str, node: str, *, now: float, lease: float) -> Placement: ...
    def begin_move(self, workspace_id: str, source: str, target: str) -> None: ...
    def finish_move(
        self, workspace_id: str, source: str, target: str, *, now: float, lease: float
    ) -> None: ...
    def abort_move(self, workspace_id: str, source: str) -> None: ...


@dataclass(frozen=True)
class MoveReport:
    workspace_id: str
    source: str | None  # None: it was nowhere yet, and is now simply placed on the target
    target: str
    files: int
    bytes: int


class _Nodes:
    """Signed calls to the nodes' move endpoints."""

    def __init__(self, secret: str, clock: Callable[[], float]) -> None:
        self.secret, self.clock = secret, clock
        self.http = httpx.Client(timeout=_TIMEOUT)

    def call(self, node: Node, method: str, workspace_id: str, step: str, body: Any = None) -> dict[str, Any]:
        path = f"/internal/v1/workspaces/{workspace_id}" + (f"/{step}" if step else "")
        raw = b"" if body is None else json.dumps(body).encode("utf-8")
        signed = signing.sign(
            self.secret,
            method=method,
            path=path,
            principal=None,
            workspace_id=workspace_id,
            target=node.name,
            body=raw,
            now=self.clock(),
        )
        headers = {
            signing.PRINCIPAL_HEADER.decode(): signed.principal,
            signing.SIGNATURE_HEADER.decode(): signed.signature,
            "content-type": "application/json",
        }
        try:
            response = self.http.request(
                method, node.advertise_url + path, content=raw or None, headers=headers
            )
        except httpx.TransportError as exc:
            raise MoveFailed(f"node {node.name!r} at {node.advertise_url} cannot be reached ({exc})") from exc
        if not response.is_success:
            raise MoveFailed(
                f"node {node.name!r} refused to {step or 'delete'}: "
                f"HTTP {response.status_code} {response.text}"
            )
        found: dict[str, Any] = response.json()
        return found

    def close(self) -> None:
        self.http.close()


def move(
    store: _Plane,
    workspace_id: str,
    target_name: str,
    *,
    secret: str,
    lease: float,
    heartbeat_timeout: float,
    clock: Callable[[], float] = time.time,
    say: Callable[[str], None] = lambda line: None,
) -> MoveReport:
    nodes = {n.name: n for n in store.nodes()}
    target = nodes.get(target_name)
    if target is None:
        raise BadRequest(
            f"no node named {target_name!r}; the nodes are: {', '.join(sorted(nodes)) or 'none'}"
        )
    if not is_live(target, now=clock(), heartbeat_timeout=heartbeat_timeout):
        raise BadRequest(
            f"node {target_name!r} has not been heard from; start it before moving anything to it"
        )
    placement = store.placement(workspace_id)
    if placement is None:
        store.place_on(workspace_id, target.name, now=clock(), lease=lease)
        say(f"workspace {workspace_id} was on no node yet; it is placed on {target.name}")
        return MoveReport(workspace_id, None, target.name, 0, 0)
    if placement.node == target.name:
        raise BadRequest(f"workspace {workspace_id} is already on node {target.name!r}")
    source = nodes.get(placement.node)
    if source is None or not is_live(source, now=clock(), heartbeat_timeout=heartbeat_timeout):
        raise BadRequest(
            f"node {placement.node!r}, which holds workspace {workspace_id}, has not been heard from; "
            "its files are there: start it again before moving the workspace"
        )
    link = _Nodes(secret, clock)
    try:
        if placement.moving_to is not None:  # an earlier move stopped half-way (its command died)
            say(f"an earlier move of {workspace_id} to {placement.moving_to} did not finish; calling it off")
            earlier = nodes.get(placement.moving_to)
            store.abort_move(workspace_id, source.name)
            with contextlib.suppress(MoveFailed):
                link.call(source, "POST", workspace_id, "resume")
            if earlier is not None:
                with contextlib.suppress(MoveFailed):
                    link.call(earlier, "DELETE", workspace_id, "")
        return _move(store, link, workspace_id, source, target, lease=lease, clock=clock, say=say)
    finally:
        link.close()


def _move(
    store: _Plane,
    link: _Nodes,
    workspace_id: str,
    source: Node,
    target: Node,
    *,
    lease: float,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> MoveReport:
    store.begin_move(workspace_id, source.name, target.name)
    say(f"draining workspace {workspace_id} on {source.name} (its calls get 503 + Retry-After meanwhile)")
    flipped = copied = False
    try:
        released = manifest.from_json(link.call(source, "POST", workspace_id, "release")["manifest"])
        size = sum(e.size for e in released)
        say(f"copying {len(released)} files ({size} bytes) from {source.name} to {target.name}")
        order = {"source": source.name, "url": source.advertise_url, "manifest": manifest.to_json(released)}
        pulled = manifest.from_json(link.call(target, "POST", workspace_id, "pull", order)["manifest"])
        copied = True
        problems = manifest.differences(released, pulled)
        if problems:
            raise MoveFailed("the copy differs from the original: " + "; ".join(problems[:10]))
        say(f"verified {len(pulled)} files by SHA-256; switching the workspace to {target.name}")
        store.finish_move(workspace_id, source.name, target.name, now=clock(), lease=lease)
        flipped = True
    except BaseException:
        if not flipped:
            _call_off(store, link, workspace_id, source, target, copied=copied)
        raise
    _open(link, target, workspace_id, clock=clock)
    say(f"{target.name} serves workspace {workspace_id}; deleting the old copy on {source.name}")
    link.call(source, "DELETE", workspace_id, "")
    return MoveReport(workspace_id, source.name, target.name, len(pulled), size)


def _open(link: _Nodes, target: Node, workspace_id: str, *, clock: Callable[[], float]) -> None:
    """Have the target start the workspace's engine on the copy; a busy target (503) is asked again
    for up to :data:`OPEN_DEADLINE_S` seconds. Until it has served it, the old copy stays."""
    deadline = clock() + OPEN_DEADLINE_S
    while True:
        try:
            link.call(target, "POST", workspace_id, "open")
            return
        except MoveFailed as exc:
            if "HTTP 503" not in exc.message or clock() > deadline:
                raise MoveFailed(
                    f"{exc.message}; the workspace is switched to {target.name!r}, whose copy is checked, "
                    "and the old copy is kept (nothing is lost); see that node's logs"
                ) from exc
            time.sleep(1.0)  # a busy node: its engine start timed out; ask again


def _call_off(
    store: _Plane, link: _Nodes, workspace_id: str, source: Node, target: Node, *, copied: bool
) -> None:
    """The move failed before the flip: the workspace stays on the source, served again."""
    store.abort_move(workspace_id, source.name)
    with contextlib.suppress(MoveFailed):  # else the source refuses it until restarted; files intact
        link.call(source, "POST", workspace_id, "resume")
    if copied:  # the target's copy, settled but not placed there: not the workspace's data
        with contextlib.suppress(MoveFailed):
            link.call(target, "DELETE", workspace_id, "")
