-- 0006: moves that survive their command (issue 15 item 3). One file for SQLite and PostgreSQL.
--
-- placements.move_id        the moves row of the move under way (NULL when none is).
-- placements.move_deadline  the drain is a lease: the command that moves the workspace pushes this
--                           forward while it works; once it has passed, the node holding the
--                           workspace calls the move off and serves it again.
-- moves                     every move, in the order begun: from which node to which, how far it got
--                           (draining → copied → flipped → served → cleaned; or called_off →
--                           discarded once the target removed its unused copy), when, and why it
--                           stopped if it did. `almanac workspace move --status` reads it;
--                           `--finish` completes a move that flipped but kept the old copy.

ALTER TABLE placements ADD COLUMN move_id TEXT;
ALTER TABLE placements ADD COLUMN move_deadline TEXT;
-- a move marked before this version has no record and no deadline: it is called off (its command,
-- from before the upgrade, cannot flip it any more: the flip now names the move)
UPDATE placements SET moving_to = NULL WHERE moving_to IS NOT NULL;

CREATE TABLE moves (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    source       TEXT NOT NULL,
    target       TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN (
                     'draining', 'copied', 'flipped', 'served', 'cleaned', 'called_off', 'discarded')),
    began_at     TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    note         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX moves_workspace ON moves (workspace_id, began_at);
CREATE INDEX moves_state ON moves (state);
