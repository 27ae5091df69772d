-- 0003: the OAuth 2.1 authorization server (gw:oauth).
--
-- oauth_clients   clients known to this server: registered through /register (RFC 7591, kind 'dcr')
--                 or described by a client ID metadata document (an https client_id, kind 'cimd',
--                 cached until expires_at). metadata is the client's JSON record. A 'dcr' client
--                 never used (last_used_at NULL) is garbage-collected after a while.
-- oauth_requests  an /authorize request waiting for the owner's consent (short-lived).
-- oauth_codes     authorization codes (stored as sha256), single use: used_at marks a spent one.
--                 The consent's choices (connection name, workspace, read-only, pinned scope) ride
--                 with the code; the connection is created when the code is exchanged.
-- connections.resource  the RFC 8707 resource (our /mcp URL) an OAuth grant is bound to; every
--                 /mcp call checks it. NULL for personal access tokens.

CREATE TABLE oauth_clients (
    client_id    TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('dcr', 'cimd')),
    metadata     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    expires_at   TEXT
);
CREATE INDEX oauth_clients_unused ON oauth_clients (kind, created_at) WHERE last_used_at IS NULL;

CREATE TABLE oauth_requests (
    id         TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL,
    params     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

CREATE TABLE oauth_codes (
    code_hash      TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL,
    owner_id       TEXT NOT NULL REFERENCES owners(id),
    workspace_id   TEXT NOT NULL REFERENCES workspaces(id),
    name           TEXT NOT NULL,
    read_only      INTEGER NOT NULL CHECK (read_only IN (0, 1)),
    scope          TEXT,
    redirect_uri   TEXT NOT NULL,
    redirect_explicit INTEGER NOT NULL CHECK (redirect_explicit IN (0, 1)),
    code_challenge TEXT NOT NULL,
    resource       TEXT NOT NULL,
    scopes         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    used_at        TEXT,
    connection_id  TEXT REFERENCES connections(id)
);

ALTER TABLE connections ADD COLUMN resource TEXT;
