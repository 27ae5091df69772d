"""``almanac workspace move WS --to NODE`` (``run:scale-out``): the steps, in order, each one a signed
call to a node's :mod:`gateway.cluster.move.endpoints` endpoints over HTTP (the nodes may be on different
hosts) or one row change in the control plane:

1. mark the placement as moving, its source still serving it;
2. copy while the source serves: the target pulls every file of the source's folder as the source
   lists it (a *snapshot*), then again what changed meanwhile (*catch-up* passes, until one takes
   less than :data:`CLOSE_ENOUGH_S` or after :data:`CATCH_UP_PASSES`), comparing sizes and SHA-256;
3. the final sync: every node refuses the workspace (503 ``workspace_moving``, told to wait as long
   as the last catch-up pass took); the source releases it — refuses it locally at once, lets the
   calls in flight finish, stops its engine, and lists its files with their SHA-256 — and the target
   fetches what still differs, checks every file, and lists what it now has: the two lists must be
   the same, file by file;
4. flip the placement to the target (the refusal ends: calls go to the target);
5. the target starts the workspace's engine on the copy (it serves it);
6. only then the source deletes its old copy.

Anything failing before the flip calls the move off (the target removes what it received, the
source serves the workspace again); nothing is deleted before the target has served the copy.

The move is a lease: it is recorded (:mod:`gateway.control.moves`) with a deadline that a thread of
this command pushes forward while it works. A command that dies before the flip pushes nothing, and
the source node calls the move off once the deadline has passed. One that dies after the flip
leaves the old copy on the source: :func:`finish` (``--finish``) completes the move — and every
earlier move that left an old copy too.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from gateway.cluster import manifest, signing
from gateway.cluster.backups import Chunks
from gateway.cluster.journal import finish_problem, old_copies
from gateway.cluster.placement import is_live
from gateway.control.records import MoveRecord, Node, Placement, State
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, GatewayError, MoveCalledOff, MoveFailed

_TIMEOUT = httpx.Timeout(30.0, read=600.0)
#: How long the target node is asked to start the moved workspace before the move gives up (seconds).
OPEN_DEADLINE_S = 120.0
#: At most this many catch-up passes follow the first copy, while the source serves.
CATCH_UP_PASSES = 3
#: A catch-up pass quicker than this (seconds) leaves little for the final sync: it begins.
CLOSE_ENOUGH_S = 0.5


@dataclass(frozen=True)
class MoveConfig:
    secret: str  # the nodes' cluster_secret
    lease: float  # a placement's lease (the target's starts at the flip)
    heartbeat_timeout: float  # a node not heard from for this long is down
    timeout: float  # move_timeout: a move not advanced for this long is called off by its source


def no_pause(seam: str) -> None:
    """The default: no pause between steps (tests pause at a seam to kill the command there)."""


@dataclass(frozen=True)
class MoveReport:
    workspace_id: str
    source: str | None  # None: it was nowhere yet, and is now simply placed on the target
    target: str
    files: int
    bytes: int
    refused_for: float = 0.0  # how long the final sync refused the workspace (seconds)


class NodeCalls:
    """Signed calls to the nodes' endpoints under ``/internal/v1/workspaces/`` (moves, copy erases)."""

    def __init__(self, secret: str, clock: Callable[[], float]) -> None:
        self.secret, self.clock = secret, clock
        self.http = httpx.Client(timeout=_TIMEOUT)

    def call(self, node: Node, method: str, workspace_id: str, step: str, body: Any = None) -> dict[str, Any]:
        raw = b"" if body is None else json.dumps(body).encode("utf-8")
        return self.send(node, method, workspace_id, step, raw, "application/json")

    def send(
        self, node: Node, method: str, workspace_id: str, step: str, raw: bytes, content_type: str
    ) -> dict[str, Any]:
        """One signed call with ``raw`` as its body (signed too); the node's JSON answer."""
        return self._request(node, method, workspace_id, step, raw, {"content-type": content_type})

    def stream(self, node: Node, method: str, workspace_id: str, step: str, chunks: Chunks) -> dict[str, Any]:
        """One signed call whose body is a file streamed in bounded chunks (never held whole): the
        signature covers the SHA-256 the file is declared to have, which the node checks against
        the bytes that arrive (:data:`~gateway.cluster.signing.CONTENT_DIGEST_HEADER`)."""
        headers = {
            "content-type": "application/octet-stream",
            signing.CONTENT_DIGEST_HEADER.decode(): chunks.entry.sha256,
        }
        try:
            found = self._request(
                node, method, workspace_id, step, chunks, headers, digest=chunks.entry.sha256
            )
        except MoveFailed:
            if chunks.done:  # read whole but not the file declared (the node refused it): say so first
                chunks.check()
            raise
        chunks.check()
        return found

    def _request(
        self,
        node: Node,
        method: str,
        workspace_id: str,
        step: str,
        content: bytes | Chunks,
        headers: dict[str, str],
        *,
        digest: str | None = None,
    ) -> dict[str, Any]:
        path = f"/internal/v1/workspaces/{workspace_id}" + (f"/{step}" if step else "")
        signed = signing.sign(
            self.secret,
            method=method,
            path=path,
            principal=None,
            workspace_id=workspace_id,
            target=node.name,
            body=content if isinstance(content, bytes) else b"",
            now=self.clock(),
            digest=digest,
        )
        headers = {
            signing.PRINCIPAL_HEADER.decode(): signed.principal,
            signing.SIGNATURE_HEADER.decode(): signed.signature,
            **headers,
        }
        body = (content or None) if isinstance(content, bytes) else iter(content)
        try:
            response = self.http.request(
                method, node.advertise_url + quote(path), content=body, headers=headers
            )
        except httpx.TransportError as exc:
            raise MoveFailed(f"node {node.name!r} at {node.advertise_url} cannot be reached ({exc})") from exc
        if not response.is_success:
            raise MoveFailed(f"node {node.name!r} could not {step or 'delete'}: {refusal(response)}")
        found: dict[str, Any] = response.json()
        return found

    def close(self) -> None:
        self.http.close()


def refusal(response: httpx.Response) -> str:
    """What a node's error answer says (its JSON error's message and code), else its status and text."""
    try:
        error = response.json()["error"]
        return f"{error['message']} ({error['code']}, HTTP {response.status_code})"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code} {response.text}"


def _live_nodes(
    store: ControlPlane, config: MoveConfig, clock: Callable[[], float], *names: str
) -> dict[str, Node]:
    nodes = {n.name: n for n in store.nodes.all()}
    for name in names:
        node = nodes.get(name)
        if node is not None and node.lost:
            raise BadRequest(
                f"node {name!r} was declared lost; its copy cannot be reached (nothing changed). If its disk "
                f"came back, `almanac node lost {name} --undo --confirm` first"
            )
        if node is None or not is_live(node, now=clock(), heartbeat_timeout=config.heartbeat_timeout):
            raise BadRequest(f"node {name!r} has not been heard from; start it again first (nothing changed)")
    return nodes


def move(
    store: ControlPlane,
    workspace_id: str,
    target_name: str,
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None] = lambda line: None,
    pause: Callable[[str], None] = no_pause,
) -> MoveReport:
    nodes = {n.name: n for n in store.nodes.all()}
    target = nodes.get(target_name)
    if target is None:
        raise BadRequest(
            f"no node named {target_name!r}; the nodes are: {', '.join(sorted(nodes)) or 'none'}"
        )
    if target.lost:
        raise BadRequest(f"node {target_name!r} was declared lost; nothing is moved to it (nothing changed)")
    if not is_live(target, now=clock(), heartbeat_timeout=config.heartbeat_timeout):
        raise BadRequest(
            f"node {target_name!r} has not been heard from; start it before moving anything to it"
        )
    placement = store.nodes.placement(workspace_id)
    if placement is None:
        store.nodes.place_on(workspace_id, target.name, now=clock(), lease=config.lease)
        say(f"workspace {workspace_id} was on no node yet; it is placed on {target.name}")
        return MoveReport(workspace_id, None, target.name, 0, 0)
    if placement.node == target.name:
        raise BadRequest(f"workspace {workspace_id} is already on node {target.name!r}")
    source = nodes.get(placement.node)
    if source is not None and source.lost:
        raise BadRequest(
            f"workspace {workspace_id} is on node {source.name!r}, which was declared lost: its files are "
            "gone with it. Restore it from a backup instead: `almanac workspace restore NAME --owner EMAIL "
            "--from DIR --to NODE` (nothing changed)"
        )
    if source is None or not is_live(source, now=clock(), heartbeat_timeout=config.heartbeat_timeout):
        raise BadRequest(
            f"node {placement.node!r}, which holds workspace {workspace_id}, has not been heard from; "
            "its files are there: start it again before moving the workspace"
        )
    link = NodeCalls(config.secret, clock)
    try:
        if placement.moving_to is not None:
            call_off_lapsed(store, link, placement, nodes, clock=clock, say=say)
        return _move(store, link, workspace_id, source, target, config, clock=clock, say=say, pause=pause)
    finally:
        link.close()


def call_off_lapsed(
    store: ControlPlane,
    link: NodeCalls,
    placement: Placement,
    nodes: dict[str, Node],
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> None:
    """An earlier move is marked: refused while it may still be running (its deadline ahead), else
    called off here (its source would do so at its next heartbeat anyway)."""
    deadline = placement.move_deadline
    earlier = None if placement.move_id is None else store.moves.by_id(placement.move_id)
    if earlier is None or (deadline is not None and deadline > clock()):
        wait = (
            ""
            if deadline is None
            else f" (called off at the latest {max(0.0, deadline - clock()):.0f} s from now)"
        )
        raise BadRequest(
            f"another move of workspace {placement.workspace_id} to {placement.moving_to} is under way"
            f"{wait}; "
            "wait for it to end and try again"
        )
    say(f"an earlier move of {placement.workspace_id} to {earlier.target} stopped half-way; calling it off")
    store.moves.abort(earlier, now=clock(), reason="its command stopped advancing it before its deadline")
    with contextlib.suppress(MoveFailed):
        link.call(nodes[earlier.source], "POST", earlier.workspace_id, "resume")
    if earlier.target in nodes:
        with contextlib.suppress(MoveFailed):
            link.call(nodes[earlier.target], "DELETE", earlier.workspace_id, "")
            store.moves.record(earlier.id, "discarded", now=clock(), note=earlier.note)


class Renewer:
    """While the command works, push the move's deadline forward every quarter of ``timeout`` from
    a thread (one long copy must not let it lapse). A killed command renews nothing: the move
    lapses and its source calls it off."""

    def __init__(self, store: ControlPlane, move_id: str, timeout: float, clock: Callable[[], float]) -> None:
        self.store, self.move_id, self.timeout, self.clock = store, move_id, timeout, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="move-renewer", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.timeout / 4):
            try:
                self.store.moves.advance(self.move_id, now=self.clock(), timeout=self.timeout)
            except MoveCalledOff:  # the next step finds out, and stops
                return
            except Exception:  # the database is unreachable for now: try again at the next quarter
                continue

    def __enter__(self) -> Renewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _move(
    store: ControlPlane,
    link: NodeCalls,
    workspace_id: str,
    source: Node,
    target: Node,
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
    pause: Callable[[str], None],
) -> MoveReport:
    move = store.moves.begin(
        workspace_id, source.name, target.name, now=clock(), timeout=config.timeout, copying=True
    )
    say(f"copying workspace {workspace_id} from {source.name} to {target.name} while {source.name} serves it")
    flipped = False
    try:
        with Renewer(store, move.id, config.timeout, clock):
            wait = _copy_while_serving(link, move, source, target, say=say)
            pause("caught-up")
            began = time.monotonic()
            store.moves.begin_final_sync(move.id, now=clock(), timeout=config.timeout, ends=clock() + wait)
            say(
                f"final sync: workspace {workspace_id} refused everywhere meanwhile "
                f"(Retry-After: {math.ceil(max(1.0, wait))} s)"
            )
            reply = link.call(source, "POST", workspace_id, "release", {"retry_after": wait})
            releasing = time.monotonic() - began
            released = manifest.from_json(reply["manifest"])
            size = sum(e.size for e in released)
            pause("released")
            store.moves.advance(move.id, now=clock(), timeout=config.timeout)
            final = link.call(
                target, "POST", workspace_id, "pull", _order(move, source, released, final=True)
            )
            pulled = manifest.from_json(final["manifest"])
            problems = manifest.differences(released, pulled)
            if problems:
                raise MoveFailed("the copy differs from the original: " + "; ".join(problems[:10]))
            store.moves.advance(move.id, now=clock(), timeout=config.timeout, state="copied")
            pause("copied")
            store.moves.finish(move, now=clock(), lease=config.lease)
            flipped = True
            refused = time.monotonic() - began
    except BaseException as exc:
        if not flipped:
            reason = exc.message if isinstance(exc, GatewayError) else f"the command stopped ({exc!r})"
            _call_off(store, link, move, source, target, clock=clock, reason=reason)
        raise
    with contextlib.suppress(MoveFailed):  # its calls go to the target now (else at its next heartbeat)
        link.call(source, "POST", workspace_id, "resume")
    say(
        f"switched workspace {workspace_id} to {target.name}: {len(pulled)} files ({size} bytes) verified by "
        f"SHA-256; the final sync copied {final['fetched']} of them and refused calls for {refused:.2f} s "
        f"({releasing:.2f} s of it to stop the workspace on {source.name})"
    )
    pause("flipped")
    _complete(store, link, move, source, target, clock=clock, say=say, pause=pause)
    return MoveReport(workspace_id, source.name, target.name, len(pulled), size, refused)


def _order(
    move: MoveRecord, source: Node, wanted: tuple[manifest.Entry, ...], *, fresh: bool = False, final: bool
) -> dict[str, Any]:
    return {
        "source": source.name,
        "url": source.advertise_url,
        "manifest": manifest.to_json(wanted),
        "move": move.id,
        "fresh": fresh,
        "final": final,
    }


def _copy_while_serving(
    link: NodeCalls, move: MoveRecord, source: Node, target: Node, *, say: Callable[[str], None]
) -> float:
    """The first copy and the catch-up passes, the source serving the workspace meanwhile; returns
    how long the last pass took (seconds): what the final sync is expected to take."""
    took = 0.0
    for number in range(1 + CATCH_UP_PASSES):
        began = time.monotonic()
        listed = manifest.from_json(link.call(source, "POST", move.workspace_id, "snapshot")["manifest"])
        order = _order(move, source, listed, fresh=number == 0, final=False)
        reply = link.call(target, "POST", move.workspace_id, "pull", order)
        took = time.monotonic() - began
        say(
            f"pass {number + 1}: copied {reply['fetched']} of {len(listed)} files ({reply['bytes']} bytes) "
            f"in {took:.2f} s while {source.name} served the workspace"
        )
        if number > 0 and took < CLOSE_ENOUGH_S:
            break
    return took


def _complete(
    store: ControlPlane,
    link: NodeCalls,
    move: MoveRecord,
    source: Node,
    target: Node,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
    pause: Callable[[str], None] = no_pause,
) -> None:
    """After the flip: the target serves the workspace, then the source deletes its old copy. A
    failure is noted on the move's record; ``--finish`` picks up from there."""
    workspace_id = move.workspace_id
    state = store.moves.by_id(move.id)
    try:
        if state is None or state.state == "flipped":
            open_on(link, target, workspace_id, clock=clock)
            store.moves.record(move.id, "served", now=clock())
        pause("served")
        say(f"{target.name} serves workspace {workspace_id}; deleting the old copy on {source.name}")
        link.call(source, "DELETE", workspace_id, "")
    except MoveFailed as exc:
        now = store.moves.by_id(move.id)
        store.moves.record(move.id, "flipped" if now is None else now.state, now=clock(), note=exc.message)
        raise MoveFailed(
            f"{exc.message}; the workspace is switched to {target.name!r} and the old copy on "
            f"{source.name!r} is kept: run `almanac workspace move --finish` once both nodes answer"
        ) from exc
    store.moves.record(move.id, "cleaned", now=clock())


def finish(
    store: ControlPlane,
    workspace_id: str,
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None] = lambda line: None,
) -> list[MoveRecord]:
    """Complete every move of the workspace that switched it but kept the old copy on its source —
    the last one and any earlier one (moved A → B keeping A's copy, then B → C): newest first, the
    workspace's node serves it (if that move's target has not yet), then each old copy is deleted by
    its node. Refused (nothing changes) while a move is under way, when the placement does not name
    the last move's target, or when no old copy is left. Returns the moves completed."""
    moves = store.moves.of_workspace(workspace_id)
    last = moves[-1] if moves else None
    placement = store.nodes.placement(workspace_id)
    pending = old_copies(moves, placement)
    problem = finish_problem(last, placement)
    if problem is not None and (not pending or last is None or last.state not in _SETTLED):
        raise BadRequest(f"cannot finish a move of workspace {workspace_id}: {problem}")
    if not pending or placement is None:
        raise BadRequest(f"cannot finish a move of workspace {workspace_id}: no old copy is left")
    nodes = _live_nodes(store, config, clock, placement.node, *{r.source for r in pending})
    link = NodeCalls(config.secret, clock)
    done = []
    try:
        for record in pending:
            if record.target == placement.node:  # its target serves it first, then the copy goes
                _complete(
                    store, link, record, nodes[record.source], nodes[record.target], clock=clock, say=say
                )
            else:  # a later move carried the workspace on from its target: only the old copy is left
                _delete_old_copy(store, link, record, nodes[record.source], clock=clock, say=say)
            found = store.moves.by_id(record.id)
            assert found is not None
            done.append(found)
    finally:
        link.close()
    return done


#: A last move in one of these states leaves nothing to finish itself; an earlier one may.
_SETTLED: tuple[State, ...] = ("cleaned", "called_off", "discarded")


def _delete_old_copy(
    store: ControlPlane,
    link: NodeCalls,
    move: MoveRecord,
    source: Node,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> None:
    say(f"deleting the old copy an earlier move ({move.source} -> {move.target}) left on {source.name}")
    try:
        link.call(source, "DELETE", move.workspace_id, "")
    except MoveFailed as exc:
        store.moves.record(move.id, move.state, now=clock(), note=exc.message)
        raise MoveFailed(
            f"{exc.message}; the old copy on {source.name!r} of the move to {move.target!r} is kept"
        ) from exc
    store.moves.record(move.id, "cleaned", now=clock())


def open_on(link: NodeCalls, target: Node, workspace_id: str, *, clock: Callable[[], float]) -> None:
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
    store: ControlPlane,
    link: NodeCalls,
    move: MoveRecord,
    source: Node,
    target: Node,
    *,
    clock: Callable[[], float],
    reason: str,
) -> None:
    """The move failed before the flip: the workspace stays on the source, served again; the target
    removes whatever it received (its staging folder, or a settled copy never placed there) — at
    once, or, if it cannot be reached, by itself once it heartbeats again (the move stays
    ``called_off`` until then)."""
    if not store.moves.abort(move, now=clock(), reason=reason):
        return  # called off already (its deadline passed): the source serves it again by itself
    with contextlib.suppress(MoveFailed):  # else the source's heartbeat resumes it
        link.call(source, "POST", move.workspace_id, "resume")
    with contextlib.suppress(MoveFailed):  # else the target removes it by itself
        link.call(target, "DELETE", move.workspace_id, "")
        store.moves.record(move.id, "discarded", now=clock(), note=reason)
