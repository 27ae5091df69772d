-- 0009: a node's name held by one process at a time, and the volume it keeps its workspaces on
-- (run:scale-out; deploy/SCALING.md "What is fenced"). One file for SQLite and PostgreSQL.
--
-- nodes.generation   moved on by every process that starts under the node's name (after it took the
--                    name's lock): the fencing token. A heartbeat renews the node's leases only while
--                    the generation is still its own, so a process that lost its name to a newer one
--                    renews nothing and stops serving when its last lease runs out.
-- nodes.volume_id    the identity of the node's data directory (the file `volume-id` in it), recorded
--                    at its first start; NULL for a node that has not started since this migration.
-- nodes.volume_seen  the identity its running process found in its data directory at its last start
--                    ('' when there was none: an empty volume). Different from volume_id, the node is on
--                    a volume that is not its own: every workspace placed on it is refused as lost
--                    (503 volume_mismatch) until it is started again on its own volume.

ALTER TABLE nodes ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN volume_id TEXT;
ALTER TABLE nodes ADD COLUMN volume_seen TEXT;
