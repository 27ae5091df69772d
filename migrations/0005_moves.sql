-- 0005: moving a workspace between nodes (issue 15 item 3). One file for SQLite and PostgreSQL.
--
-- placements.moving_to  the node a workspace is being moved to, while the move runs: every node
--                       then answers its calls 503 (short Retry-After) until the placement flips
--                       to that node (or the move is called off and it is cleared).

ALTER TABLE placements ADD COLUMN moving_to TEXT REFERENCES nodes(name);
