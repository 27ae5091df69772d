"""Every error the gateway raises, in one tree.

Each class carries a stable ``code`` (clients and tests match on it, never on the message) and the
HTTP ``status`` it renders as. :func:`render` turns any of them into the one JSON envelope
``{"error": {"code": …, "message": …}}`` plus its headers; the proxy and every Starlette route use it.

    GatewayError                      500 internal_error
    ├── ConfigError                   500 config_invalid       (bad setting; the CLI exits 2)
    │   ├── DataDirError              500 data_dir_unusable    (cannot write it; control DB missing/corrupt)
    │   └── PortInUse                 500 port_unavailable     (cannot listen on the host and port)
    ├── MoveFailed                    500 move_failed          (a workspace move called off; the CLI exits 1)
    │   └── MoveSourceUnreachable     502 move_source_unreachable (the source stopped answering a pull)
    ├── BadRequest                    400 bad_request
    │   ├── MoveCalledOff             400 move_called_off      (a step of a move called off or replaced)
    │   ├── InvalidScope              400 invalid_scope
    │   ├── InvalidEmail              400 invalid_email
    │   ├── InvalidName               400 invalid_name
    │   ├── InvalidPassword           400 invalid_password
    │   ├── InviteInvalid             400 invite_invalid
    │   ├── ResetLinkInvalid          400 reset_link_invalid   (a reset link unknown, used or expired)
    │   └── InvalidGrant              400 invalid_grant        (OAuth: bad, spent or reused code/token)
    ├── Unauthorized                  401 invalid_token        (+ WWW-Authenticate)
    │   └── ClusterSignatureInvalid   401 cluster_signature_invalid (a call between nodes not signed right)
    │       └── ClusterSignatureReplayed 401 cluster_signature_replayed (a signed call received before)
    ├── Forbidden                     403 forbidden
    │   ├── OriginNotAllowed          403 origin_not_allowed
    │   ├── HostNotAllowed            403 host_not_allowed
    │   ├── CsrfFailed                403 csrf_failed
    │   └── SignupClosed              403 signup_closed
    ├── NotFound                      404 not_found
    │   ├── OwnerNotFound             404 owner_not_found
    │   ├── WorkspaceNotFound         404 workspace_not_found
    │   ├── TokenNotFound             404 token_not_found
    │   └── SessionNotFound           404 session_not_found
    ├── MethodNotAllowed              405 method_not_allowed   (+ Allow)
    ├── AlreadyExists                 409 already_exists
    │   └── MoveUnderWay              409 move_under_way       (an account erase refused while a move runs)
    ├── PayloadTooLarge               413 payload_too_large
    ├── RateLimited                   429 rate_limited         (+ Retry-After)
    └── WorkspaceUnavailable          503 workspace_unavailable (+ Retry-After; nothing was forwarded)
        ├── EngineStartFailed         503 engine_start_failed
        ├── EngineStartTimeout        503 engine_start_timeout
        ├── EngineCapacity            503 engine_capacity
        ├── EngineCrashLoop           503 engine_crash_loop
        ├── EngineUnreachable         503 engine_unreachable
        ├── NodeUnavailable           503 node_unavailable     (its node is down, its lease ran out)
        ├── WorkspaceMoving           503 workspace_moving     (being moved to another node)
        ├── WorkspaceRestoring        503 workspace_restoring  (being restored from a backup)
        ├── WorkspaceLost             410 workspace_lost       (its node was declared lost)
        │   └── WorkspaceVolumeMissing 503 volume_mismatch   (its node runs on a volume not its own)
        └── ControlPlaneUnavailable   503 control_plane_unavailable (the control plane cannot be reached)
"""

from __future__ import annotations

import json
import math
from typing import ClassVar


class GatewayError(Exception):
    """Root of the tree. ``message`` says what went wrong and how to fix it."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def headers(self) -> dict[str, str]:
        """Extra response headers this error needs (``Retry-After``, ``WWW-Authenticate``, ``Allow``)."""
        return {}


class ConfigError(GatewayError):
    code = "config_invalid"


class DataDirError(ConfigError):
    code = "data_dir_unusable"


class PortInUse(ConfigError):
    code = "port_unavailable"


class MoveFailed(GatewayError):
    code = "move_failed"


class MoveSourceUnreachable(MoveFailed):
    """The node a move copies from stopped answering while the target pulled its files."""

    code = "move_source_unreachable"
    status = 502


class BadRequest(GatewayError):
    code = "bad_request"
    status = 400


class MoveCalledOff(BadRequest):
    """A step of a workspace move that is no longer under way (called off, or replaced by another)."""

    code = "move_called_off"


class InvalidScope(BadRequest):
    code = "invalid_scope"


class InvalidEmail(BadRequest):
    code = "invalid_email"


class InvalidName(BadRequest):
    code = "invalid_name"


class InvalidPassword(BadRequest):
    code = "invalid_password"


class InviteInvalid(BadRequest):
    code = "invite_invalid"


class ResetLinkInvalid(BadRequest):
    code = "reset_link_invalid"


class InvalidGrant(BadRequest):
    code = "invalid_grant"


class Unauthorized(GatewayError):
    code = "invalid_token"
    status = 401

    def __init__(
        self, message: str, *, resource_metadata: str = "", error: str | None = None, scope: str | None = None
    ) -> None:
        super().__init__(message)
        self.resource_metadata = resource_metadata
        self.error = error
        self.scope = scope

    def headers(self) -> dict[str, str]:
        parts = []
        if self.error:
            parts.append(f'error="{self.error}"')
        if self.resource_metadata:
            parts.append(f'resource_metadata="{self.resource_metadata}"')
        if self.scope:
            parts.append(f'scope="{self.scope}"')
        return {"WWW-Authenticate": "Bearer " + ", ".join(parts) if parts else "Bearer"}


class ClusterSignatureInvalid(Unauthorized):
    code = "cluster_signature_invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def headers(self) -> dict[str, str]:
        return {}


class ClusterSignatureReplayed(ClusterSignatureInvalid):
    code = "cluster_signature_replayed"


class Forbidden(GatewayError):
    code = "forbidden"
    status = 403


class OriginNotAllowed(Forbidden):
    code = "origin_not_allowed"


class HostNotAllowed(Forbidden):
    code = "host_not_allowed"


class CsrfFailed(Forbidden):
    code = "csrf_failed"


class SignupClosed(Forbidden):
    code = "signup_closed"


class NotFound(GatewayError):
    code = "not_found"
    status = 404


class OwnerNotFound(NotFound):
    code = "owner_not_found"


class WorkspaceNotFound(NotFound):
    code = "workspace_not_found"


class TokenNotFound(NotFound):
    code = "token_not_found"


class SessionNotFound(NotFound):
    code = "session_not_found"


class MethodNotAllowed(GatewayError):
    code = "method_not_allowed"
    status = 405

    def __init__(self, message: str, *, allow: tuple[str, ...]) -> None:
        super().__init__(message)
        self.allow = allow

    def headers(self) -> dict[str, str]:
        return {"Allow": ", ".join(self.allow)}


class AlreadyExists(GatewayError):
    code = "already_exists"
    status = 409


class MoveUnderWay(AlreadyExists):
    """An account erase refused (nothing erased) while one of the owner's workspaces is being moved."""

    code = "move_under_way"


class PayloadTooLarge(GatewayError):
    code = "payload_too_large"
    status = 413


class _RetryLater(GatewayError):
    """An error that tells the client when to try again (``Retry-After``, whole seconds, ≥ 1)."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class RateLimited(_RetryLater):
    code = "rate_limited"
    status = 429


class WorkspaceUnavailable(_RetryLater):
    code = "workspace_unavailable"
    status = 503


class EngineStartFailed(WorkspaceUnavailable):
    code = "engine_start_failed"


class EngineStartTimeout(WorkspaceUnavailable):
    code = "engine_start_timeout"


class EngineCapacity(WorkspaceUnavailable):
    code = "engine_capacity"


class EngineCrashLoop(WorkspaceUnavailable):
    code = "engine_crash_loop"


class EngineUnreachable(WorkspaceUnavailable):
    code = "engine_unreachable"


class NodeUnavailable(WorkspaceUnavailable):
    code = "node_unavailable"


class WorkspaceMoving(WorkspaceUnavailable):
    code = "workspace_moving"


class WorkspaceRestoring(WorkspaceUnavailable):
    """Its node was declared lost and it is being restored from a backup on another node."""

    code = "workspace_restoring"


class WorkspaceLost(WorkspaceUnavailable):
    """Its node was declared lost: waiting does not help (no ``Retry-After``); a restore does."""

    code = "workspace_lost"
    status = 410

    def headers(self) -> dict[str, str]:
        return {}


class WorkspaceVolumeMissing(WorkspaceLost):
    """Its node runs on a data directory whose volume identity is not the one recorded for it (an
    empty or swapped volume): nothing of the workspace is there, so it is refused as lost — 503, the
    operator can mend it (restart the node on its own volume); no ``Retry-After``, waiting does not."""

    code = "volume_mismatch"
    status = 503


class ControlPlaneUnavailable(WorkspaceUnavailable):
    """The control plane (PostgreSQL) cannot be reached now; nothing was changed."""

    code = "control_plane_unavailable"


def render(exc: GatewayError) -> tuple[int, dict[str, str], bytes]:
    """The one rendering of an error: status, headers (content type included) and JSON body."""
    body = json.dumps({"error": {"code": exc.code, "message": exc.message}}).encode("utf-8")
    headers = {"Content-Type": "application/json", **exc.headers()}
    return exc.status, headers, body
