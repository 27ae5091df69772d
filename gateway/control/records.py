"""What the control plane returns: frozen records, one per row kind (or per answer that joins rows).

A leaf: it imports nothing of the gateway, so every layer above the control plane (auth, engines,
cluster, edge, api, web) can name these records without importing the queries that make them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# -- owners, workspaces, connections ------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    id: str
    email: str
    created_at: str


@dataclass(frozen=True)
class Workspace:
    id: str
    owner_id: str
    name: str
    created_at: str


@dataclass(frozen=True)
class Connection:
    id: str
    owner_id: str
    workspace_id: str
    workspace_name: str
    name: str
    kind: str
    read_only: bool
    scope: str | None
    created_at: str
    last_used_at: str | None
    revoked_at: str | None
    token_prefix: str | None
    client_id: str | None = None  # an OAuth connection's client
    client_name: str | None = None  # that client's own name (its metadata's client_name), if it gave one
    reads_unscoped: bool = False  # pinned (scope set): it also reads unscoped memories


RevokedVia = Literal["page", "cli", "api"]


@dataclass(frozen=True)
class Revocation:
    """Why a connection was revoked, as its audit event records it."""

    kind: str  # "token.revoke" (by the owner, or by the OAuth client) | "oauth.refresh_reuse"
    via: str | None  # "page" | "cli" | "api" when the owner revoked it; None otherwise
    reason: str | None  # the owner's words, or the gateway's ("revoked by the client", …)


@dataclass(frozen=True)
class Principal:
    """Who a bearer token speaks for: the routing key and the identity sent to the engine."""

    owner_id: str
    workspace_id: str
    connection_id: str
    connection_name: str
    read_only: bool
    scope: str | None
    resource: str | None = None  # an OAuth grant's RFC 8707 resource; None for a PAT
    reads_unscoped: bool = False  # pinned (scope set): it also reads unscoped memories


@dataclass(frozen=True)
class AuditEvent:
    id: int
    at: str
    kind: str
    owner_id: str | None
    workspace_id: str | None
    connection_id: str | None
    remote: str | None
    detail: dict[str, object]


# -- browser accounts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """One signed-in browser. ``csrf`` is its synchroniser token (never shown outside forms)."""

    session_id: str
    owner_id: str
    email: str
    csrf: str
    created_at: str
    expires_at: str


@dataclass(frozen=True)
class ResetLink:
    """A live password-reset link, looked up by its secret."""

    owner_id: str
    email: str
    expires_at: str


# -- OAuth ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientRecord:
    client_id: str
    kind: str
    metadata: dict[str, Any]
    expires_at: float | None


@dataclass(frozen=True)
class ConsentChoice:
    """What the owner chose on the consent page, carried by the authorization code."""

    owner_id: str
    workspace_id: str
    name: str
    read_only: bool
    scope: str | None
    reads_unscoped: bool = False  # pinned: it also reads unscoped memories


@dataclass(frozen=True)
class CodeRecord:
    client_id: str
    choice: ConsentChoice
    redirect_uri: str
    redirect_explicit: bool
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]
    expires_at: float
    used: bool


@dataclass(frozen=True)
class RefreshRecord:
    connection_id: str
    client_id: str
    resource: str
    expires_at: float | None
    rotated: bool
    live: bool


@dataclass(frozen=True)
class AccessRecord:
    connection_id: str
    client_id: str
    resource: str
    expires_at: float


@dataclass(frozen=True)
class TokenLifetimes:
    access: float
    refresh: float


@dataclass(frozen=True)
class IssuedTokens:
    access_token: str
    refresh_token: str
    expires_in: int
    connection_id: str


# -- nodes and placements (run:scale-out) -------------------------------------------------------


@dataclass(frozen=True)
class Node:
    name: str
    advertise_url: str
    heartbeat_at: float  # epoch seconds
    draining: bool
    workspaces: int  # how many workspaces are placed on it
    lost: bool = False  # declared lost by an operator (its disk is gone): it serves nothing
    misplaced: bool = False  # running on a volume that is not its own (empty, swapped): it serves nothing


@dataclass(frozen=True)
class Placement:
    workspace_id: str
    node: str
    lease_expires_at: float  # epoch seconds
    moving_to: str | None = None  # a move to that node is under way (refused during its final sync)
    move_id: str | None = None  # that move's record (gateway.cluster.journal)
    move_deadline: float | None = None  # the move is called off if its command has not advanced it by then
    move_copying: bool = False  # the move copies while its source still serves (before its final sync)
    move_sync_ends: float | None = None  # when the move's final sync should end (epoch seconds)


@dataclass(frozen=True)
class Joined:
    """A process's start under a node's name (:meth:`gateway.control.nodes.Nodes.join`)."""

    node: Node
    generation: int  # this process's fencing token
    previous_lease: float  # the latest lease a previous process held (epoch seconds; 0 if none)


@dataclass(frozen=True)
class NodeVolume:
    """What the control plane knows of a node's volume before it starts."""

    recorded: str | None  # the identity recorded at its first start (None: none yet, or a new node)
    placed: int  # workspaces placed on it


@dataclass(frozen=True)
class LostNode:
    name: str
    workspaces: int  # placed on it: each is lost until restored
    called_off: tuple[MoveRecord, ...]  # moves under way from or to it, called off
    already: bool  # it was declared lost before: nothing changed


@dataclass(frozen=True)
class LostWorkspace:
    """A workspace every node refuses as lost (``almanac node lost`` lists them)."""

    node: str
    workspace_id: str
    owner_email: str
    workspace: str  # its name
    why: str  # "declared lost" or "volume not its own"


# -- moves (what each state means: gateway.cluster.journal) -------------------------------------

State = Literal["draining", "copied", "flipped", "served", "cleaned", "called_off", "discarded"]


@dataclass(frozen=True)
class MoveRecord:
    id: str
    workspace_id: str
    source: str
    target: str
    state: State
    began_at: float  # epoch seconds
    updated_at: float
    note: str = ""  # why it was called off, or what failed after the flip
    sync_began_at: float | None = None  # its final sync began refusing the workspace (epoch seconds)
    sync_ended_at: float | None = None  # it switched the workspace to its target: the refusal ended
