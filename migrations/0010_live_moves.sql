-- 0010: moves that keep serving (run:scale-out; deploy/SCALING.md "Moving a workspace"). One file
-- for SQLite and PostgreSQL.
--
-- placements.move_copying    1 while the move under way copies the workspace's files with its
--                            source still serving it; 0 once the final sync has begun (every node
--                            then refuses the workspace until the switch) — and for every move or
--                            restore marked before this version, which refused from its start.
-- placements.move_sync_ends  when the final sync is expected to end (its start plus the time the
--                            last catch-up pass took): a refused call's Retry-After is measured to it.
-- moves.sync_began_at        when the move's final sync began refusing the workspace;
-- moves.sync_ended_at        when the move switched the workspace to its target (end of the refusal).

ALTER TABLE placements ADD COLUMN move_copying INTEGER NOT NULL DEFAULT 0 CHECK (move_copying IN (0, 1));
ALTER TABLE placements ADD COLUMN move_sync_ends TEXT;
ALTER TABLE moves ADD COLUMN sync_began_at TEXT;
ALTER TABLE moves ADD COLUMN sync_ended_at TEXT;
