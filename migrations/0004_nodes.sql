-- 0004: nodes and placements (issue 15; run:scale-out groundwork). One file for SQLite and
-- PostgreSQL alike.
--
-- nodes       one row per `almanac serve` that serves workspaces from its own data directory:
--             the URL other nodes reach it at, when it last said it was alive (heartbeat_at),
--             and whether it is draining (it serves what it holds and takes nothing new).
-- placements  which node serves each workspace. The row is a lease: the node renews
--             lease_expires_at with every heartbeat, and serves the workspace only while the lease
--             holds; a workspace is never opened on a second node (its files are on the first).

CREATE TABLE nodes (
    name          TEXT PRIMARY KEY,
    advertise_url TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    heartbeat_at  TEXT NOT NULL,
    draining      INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1))
);

CREATE TABLE placements (
    workspace_id     TEXT PRIMARY KEY REFERENCES workspaces(id),
    node             TEXT NOT NULL REFERENCES nodes(name),
    lease_expires_at TEXT NOT NULL,
    placed_at        TEXT NOT NULL
);
CREATE INDEX placements_node ON placements (node);
