-- 0002: owner accounts on the web — browser sessions, login throttling, invite codes and upstream
-- OpenID Connect identities.
--
-- A *session* is one signed-in browser. The cookie holds a random secret; only its sha256 is stored
-- (token_hash), so a copy of this database cannot be replayed as a cookie. csrf is the session's
-- synchroniser token, put in every form and checked on every POST. A session ends on sign-out
-- (ended_at) or at expires_at; rows are kept so the audit trail keeps its references.

CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    owner_id     TEXT NOT NULL REFERENCES owners(id),
    token_hash   TEXT NOT NULL UNIQUE,
    csrf         TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    ended_at     TEXT,
    remote       TEXT,
    user_agent   TEXT
);
CREATE INDEX sessions_owner ON sessions (owner_id);

-- One row per failed sign-in, keyed both ways ('account:<email>' and 'address:<ip>'); throttling
-- counts the rows of a key inside the window. A successful sign-in clears its account's rows.
CREATE TABLE login_failures (
    id  INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    at  TEXT NOT NULL
);
CREATE INDEX login_failures_key ON login_failures (key, at);

-- Invite codes for `signup = "invite"`: stored as sha256, single use.
CREATE TABLE invites (
    id         TEXT PRIMARY KEY,
    code_hash  TEXT NOT NULL UNIQUE,
    note       TEXT,
    created_at TEXT NOT NULL,
    used_at    TEXT,
    used_by    TEXT REFERENCES owners(id)
);

-- An owner signed in through an upstream OpenID Connect provider: (issuer, subject) names them.
CREATE TABLE owner_identities (
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    owner_id   TEXT NOT NULL REFERENCES owners(id),
    email      TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
