-- 0001: the control plane — owners, workspaces, connections, tokens, audit events.
--
-- A *connection* is one authorised client (a personal access token today, an OAuth grant next):
-- its name is the authenticated source of every write, and it carries read-only and the pinned
-- scope. A connection holds one or more *tokens*, stored only as sha256 hashes:
--   kind 'pat'      one long-lived bearer token per PAT connection;
--   kind 'access'   short-lived OAuth access tokens (expires_at set);
--   kind 'refresh'  OAuth refresh tokens; family_id groups a rotation chain and rotated_at marks a
--                   used one, so reuse of an old refresh token can revoke the whole family.
-- Nothing is deleted on revoke: revoked_at is set, so the audit trail keeps its references.

CREATE TABLE owners (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT,
    created_at    TEXT NOT NULL,
    disabled_at   TEXT
);

CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL REFERENCES owners(id),
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (owner_id, name)
);

CREATE TABLE connections (
    id           TEXT PRIMARY KEY,
    owner_id     TEXT NOT NULL REFERENCES owners(id),
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('pat', 'oauth')),
    client_id    TEXT,
    read_only    INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    scope        TEXT,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
);
-- An owner's live connections have distinct names (the name is the source of what they write).
CREATE UNIQUE INDEX connections_live_name ON connections (owner_id, name) WHERE revoked_at IS NULL;
CREATE INDEX connections_workspace ON connections (workspace_id);

CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    connection_id TEXT NOT NULL REFERENCES connections(id),
    kind          TEXT NOT NULL CHECK (kind IN ('pat', 'access', 'refresh')),
    token_hash    TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    family_id     TEXT,
    created_at    TEXT NOT NULL,
    expires_at    TEXT,
    rotated_at    TEXT,
    revoked_at    TEXT
);
CREATE INDEX tokens_connection ON tokens (connection_id);
CREATE INDEX tokens_family ON tokens (family_id) WHERE family_id IS NOT NULL;

CREATE TABLE audit_events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            TEXT NOT NULL,
    kind          TEXT NOT NULL,
    owner_id      TEXT,
    workspace_id  TEXT,
    connection_id TEXT,
    remote        TEXT,
    detail        TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_events_owner ON audit_events (owner_id, at);
