"""The pure parts of the pages' remote engine calls (``run:scale-out``): the identity a
page's engine request speaks for, and what a page says when the owner node refuses or is down. The
wire itself (two real nodes) is ``test_pages_across_nodes.py``."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway import headers as hdr
from gateway.cluster.placement import Unavailable
from gateway.cluster.remote import caller_of, page_refusal, refusal_of
from gateway.control.records import Principal
from gateway.errors import (
    EngineCrashLoop,
    NodeUnavailable,
    WorkspaceMoving,
    WorkspaceNotFound,
    WorkspaceUnavailable,
)

pytestmark = pytest.mark.req("run:scale-out")


@pytest.mark.parametrize(
    "who",
    [
        Principal("own_1", "ws_1", "web:own_1", "Dashboard", read_only=False, scope=None),
        Principal("own_1", "ws_1", "con_2", "Ada's laptop ✓ / 50%", read_only=True, scope="project-x"),
    ],
)
def test_the_identity_a_page_put_on_its_engine_call_is_the_one_signed(who: Principal) -> None:
    found = caller_of(httpx.Headers(hdr.identity(who)), "ws_1")
    assert (found.connection_id, found.connection_name, found.read_only, found.scope) == (
        who.connection_id,
        who.connection_name,
        who.read_only,
        who.scope,
    )
    assert found.workspace_id == "ws_1"


def test_an_admin_call_without_identity_speaks_for_the_dashboard() -> None:
    found = caller_of(httpx.Headers({"content-type": "application/json"}), "ws_9")
    assert (found.workspace_id, found.connection_name, found.read_only, found.scope) == (
        "ws_9",
        "Dashboard",
        False,
        None,
    )


def _error(code: str, message: str = "why") -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def test_the_owner_node_s_refusals_become_the_same_errors_on_the_page() -> None:
    moving = refusal_of(503, _error("workspace_moving", "being moved"), "1", "node-c")
    assert isinstance(moving, WorkspaceMoving) and moving.headers() == {"Retry-After": "1"}
    crashing = refusal_of(503, _error("engine_crash_loop", "keeps failing"), "7", "node-c")
    assert isinstance(crashing, EngineCrashLoop) and crashing.headers() == {"Retry-After": "7"}
    assert crashing.message == "keeps failing"
    erased = refusal_of(404, _error("workspace_not_found", "erased"), None, "node-c")
    assert isinstance(erased, WorkspaceNotFound)
    signature = refusal_of(401, _error("cluster_signature_invalid"), None, "node-c")
    assert isinstance(signature, NodeUnavailable) and "cluster_secret" in signature.message
    unreadable = refusal_of(502, b"<html>bad gateway</html>", None, "node-c")
    assert type(unreadable) is WorkspaceUnavailable and "node-c" in unreadable.message


def test_a_page_for_a_workspace_nobody_can_serve_says_when_to_try_again() -> None:
    down = page_refusal(Unavailable("node 'node-c' has not been heard from", 1.5))
    assert isinstance(down, NodeUnavailable) and down.headers() == {"Retry-After": "2"}
    assert down.message == (
        "This workspace's node is unavailable (node 'node-c' has not been heard from); try again in 2 s."
    )
    moving = page_refusal(Unavailable("this workspace is being moved", 1.0, moving=True))
    assert isinstance(moving, WorkspaceMoving) and "try again in 1 s" in moving.message
