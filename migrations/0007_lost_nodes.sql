-- 0007: a node lost for good (issue 15; `almanac node lost NAME --confirm`). One file for SQLite and
-- PostgreSQL.
--
-- nodes.lost_at  when an operator declared the node lost (its disk is gone), NULL while it is not.
--                A lost node serves nothing and takes nothing new, whatever its heartbeat says, until
--                `almanac node lost NAME --undo --confirm` (its disk came back after all); the
--                workspaces placed on it answer `workspace_lost` until each is restored from a backup
--                on another node (`almanac workspace restore`), never re-opened empty elsewhere.

ALTER TABLE nodes ADD COLUMN lost_at TEXT;

-- erased_copies  the copies an account erase could not reach because their node was declared lost
--                (nothing was left to erase there, as far as anyone knew). Should that node come back
--                with its disk, it deletes each such folder once the erase has finished (the
--                workspace's row is gone), then the row goes: an erased account stays erased.
CREATE TABLE erased_copies (
    node         TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    recorded_at  TEXT NOT NULL,
    PRIMARY KEY (node, workspace_id)
);
