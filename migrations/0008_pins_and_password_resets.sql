-- 0008: what a pinned connection reads, and password-reset links. One file for SQLite and PostgreSQL.
--
-- connections.reads_unscoped  for a connection pinned to a scope (scope set): 1 when it also reads
--                 unscoped memories, 0 when it reads its scope only (the owner's choice at consent
--                 or token creation). It writes, retires and restores only in its scope either way;
--                 unused when scope is NULL. Every connection that existed before this migration gets
--                 0 — "this scope only" — the narrower of the two, and what the consent and token
--                 pages promised when those connections were made ("only memories in this scope").
-- oauth_codes.reads_unscoped  the same choice, carried by an authorization code to its connection.
-- password_resets  one-time links an operator gives an owner (`almanac owner reset-link EMAIL`):
--                 the link's secret is stored only as sha256 (token_hash); it works until expires_at,
--                 once (used_at marks a spent one), and only for an owner not disabled.

ALTER TABLE connections ADD COLUMN reads_unscoped INTEGER NOT NULL DEFAULT 0 CHECK (reads_unscoped IN (0, 1));
ALTER TABLE oauth_codes ADD COLUMN reads_unscoped INTEGER NOT NULL DEFAULT 0 CHECK (reads_unscoped IN (0, 1));

CREATE TABLE password_resets (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL REFERENCES owners(id),
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at    TEXT
);
CREATE INDEX password_resets_owner ON password_resets (owner_id);
