"""The control plane's nodes and placements (``run:scale-out``): the only SQL about them. The
decisions (which node takes a new workspace, where a call goes) are pure functions in
:mod:`gateway.cluster.placement`, which passes the node it chose to :meth:`Nodes.place`.

Every method takes ``now`` (epoch seconds) from the caller, like the OAuth queries. Placing a
workspace is race-free across gateways: the row is inserted with ``ON CONFLICT DO NOTHING`` and read
back, so whoever inserted first decides, and everyone then sees the same node.
"""

from __future__ import annotations

from gateway.control.clock import epoch, iso
from gateway.control.db import Database
from gateway.control.records import Joined, Node, NodeVolume, Placement
from gateway.errors import BadRequest


class PlacementError(Exception):
    """No node can take a new workspace (the message says why)."""


class NameTaken(Exception):
    """Another process started under this node's name since this one did (its fencing token is
    stale): this process must renew nothing and serve nothing."""


def node_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a node (1–63 of a-z, 0-9 and '-', like a host name), or None."""
    ok = 0 < len(name) <= 63 and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in name)
    if not ok or name.startswith("-") or name.endswith("-"):
        return f"a node name must be 1–63 of a-z, 0-9 and '-' (like a host name), got {name!r}"
    return None


_NODES = """
SELECT n.name, n.advertise_url, n.heartbeat_at, n.draining,
       (SELECT count(*) FROM placements p WHERE p.node = n.name), n.lost_at,
       CASE WHEN n.volume_id IS NOT NULL AND n.volume_seen IS NOT NULL AND n.volume_seen <> n.volume_id
            THEN 1 ELSE 0 END
FROM nodes n
"""


def _node(row: tuple[object, ...]) -> Node:
    return Node(
        str(row[0]),
        str(row[1]),
        epoch(str(row[2])),
        bool(row[3]),
        int(str(row[4])),
        row[5] is not None,
        bool(row[6]),
    )


def validate_node(name: str, advertise_url: str) -> tuple[str, str]:
    """A node name (1–63 of a-z, 0-9, '-', like a DNS label) and an http(s) URL to reach it."""
    name = name.strip()
    problem = node_name_problem(name)
    if problem is not None:
        raise BadRequest(problem)
    if not advertise_url.startswith(("http://", "https://")):
        raise BadRequest(f"a node's advertise URL must start with http:// or https://, got {advertise_url!r}")
    return name, advertise_url.rstrip("/")


class Nodes:
    def __init__(self, db: Database) -> None:
        self._db = db

    def register(self, name: str, advertise_url: str, *, now: float) -> Node:
        """Add a node, or bring a known one back (new URL, heartbeat now). A node marked draining
        stays draining across its restarts (only ``set_draining`` changes that), and one declared
        lost stays lost (only :meth:`gateway.control.lost.LostNodes.found` changes that)."""
        name, advertise_url = validate_node(name, advertise_url)
        with self._db.transaction():
            self._db.execute(
                "INSERT INTO nodes (name, advertise_url, started_at, heartbeat_at, draining) "
                "VALUES (?, ?, ?, ?, 0) ON CONFLICT (name) DO UPDATE SET "
                "advertise_url = excluded.advertise_url, started_at = excluded.started_at, "
                "heartbeat_at = excluded.heartbeat_at",
                (name, advertise_url, iso(now), iso(now)),
            )
            row = self._db.execute(_NODES + " WHERE n.name = ?", (name,)).fetchone()
        assert row is not None
        return _node(row)

    def volume(self, name: str) -> NodeVolume:
        """The volume identity recorded for ``name`` and how many workspaces are placed on it."""
        row = self._db.execute("SELECT volume_id FROM nodes WHERE name = ?", (name,)).fetchone()
        placed = self._db.execute("SELECT count(*) FROM placements WHERE node = ?", (name,)).fetchone()
        recorded = None if row is None or row[0] is None else str(row[0])
        return NodeVolume(recorded, 0 if placed is None else int(str(placed[0])))

    def join(self, name: str, advertise_url: str, *, now: float, volume_seen: str, adopt: bool) -> Joined:
        """A process starts under ``name`` (it holds the name's lock): registered as by
        :meth:`register`, with a new fencing token (``generation``), the volume identity it found
        (``volume_seen``, '' for none) and, when ``adopt``, that identity recorded as the node's own.
        Returns the token and the latest lease a previous process under the name held, which this
        one must let run out before it serves (that process may not know yet that it was replaced)."""
        with self._db.transaction():
            node = self.register(name, advertise_url, now=now)
            self._db.execute(
                "UPDATE nodes SET generation = generation + 1, volume_seen = ?, "
                "volume_id = CASE WHEN ? = 1 THEN ? ELSE volume_id END WHERE name = ?",
                (volume_seen, int(adopt), volume_seen, node.name),
            )
            row = self._db.execute("SELECT generation FROM nodes WHERE name = ?", (node.name,)).fetchone()
            leases = self._db.execute(
                "SELECT lease_expires_at FROM placements WHERE node = ?", (node.name,)
            ).fetchall()
            refreshed = self._db.execute(_NODES + " WHERE n.name = ?", (node.name,)).fetchone()
        assert row is not None and refreshed is not None
        previous = max((epoch(str(r[0])) for r in leases), default=0.0)
        return Joined(_node(refreshed), int(str(row[0])), previous)

    def release(self, name: str, generation: int, *, now: float) -> int:
        """A process under ``name`` stops (its engines stopped): its leases end now, so the next
        process under the name need not wait for them — unless the name was taken meanwhile."""
        return self._db.execute(
            "UPDATE placements SET lease_expires_at = ? WHERE node = ? "
            "AND EXISTS (SELECT 1 FROM nodes WHERE name = ? AND generation = ?)",
            (iso(now), name, name, generation),
        ).rowcount

    def heartbeat(self, name: str, *, now: float, lease: float, generation: int | None = None) -> int:
        """The node is alive: record it and renew the leases of every workspace placed on it until
        ``now + lease``. Returns how many leases were renewed (an unknown node renews none, nor
        does a node declared lost: its beat is recorded, so ``node list`` shows it is running).
        With ``generation`` (the process's fencing token), raises :class:`NameTaken` and renews
        nothing when another process has started under the name since."""
        with self._db.transaction():
            if generation is None:
                known = self._db.execute("UPDATE nodes SET heartbeat_at = ? WHERE name = ?", (iso(now), name))
            else:
                known = self._db.execute(
                    "UPDATE nodes SET heartbeat_at = ? WHERE name = ? AND generation = ?",
                    (iso(now), name, generation),
                )
                if (
                    known.rowcount == 0
                    and self._db.execute("SELECT 1 FROM nodes WHERE name = ?", (name,)).fetchone()
                ):
                    raise NameTaken(f"another process has started as node {name!r} since this one did")
            if known.rowcount == 0:
                return 0
            lost = self._db.execute("SELECT lost_at FROM nodes WHERE name = ?", (name,)).fetchone()
            if lost is not None and lost[0] is not None:
                return 0
            return self._db.execute(
                "UPDATE placements SET lease_expires_at = ? WHERE node = ?", (iso(now + lease), name)
            ).rowcount

    def set_draining(self, name: str, draining: bool) -> None:
        if (
            self._db.execute("UPDATE nodes SET draining = ? WHERE name = ?", (int(draining), name)).rowcount
            == 0
        ):
            raise BadRequest(f"no node named {name!r}")

    def all(self) -> list[Node]:
        """Every node, by name."""
        return [_node(r) for r in self._db.execute(_NODES + " ORDER BY n.name")]

    def placement(self, workspace_id: str) -> Placement | None:
        row = self._db.execute(
            "SELECT workspace_id, node, lease_expires_at, moving_to, move_id, move_deadline, move_copying, "
            "move_sync_ends FROM placements WHERE workspace_id = ?",
            (workspace_id,),
        ).fetchone()
        if row is None:
            return None
        moving_to = None if row[3] is None else str(row[3])
        move_id = None if row[4] is None else str(row[4])
        deadline = None if row[5] is None else epoch(str(row[5]))
        sync_ends = None if row[7] is None else epoch(str(row[7]))
        return Placement(
            str(row[0]),
            str(row[1]),
            epoch(str(row[2])),
            moving_to,
            move_id,
            deadline,
            move_copying=bool(row[6]),
            move_sync_ends=sync_ends,
        )

    def place_on(self, workspace_id: str, node: str, *, now: float, lease: float) -> Placement:
        """Place a workspace that is nowhere yet on ``node`` (a move of a workspace never served, one
        whose folder is on that node's disk). Raises :class:`PlacementError` for a node declared
        lost or misplaced (on a volume not its own): nothing is placed on it."""
        self._db.execute(
            "INSERT INTO placements (workspace_id, node, lease_expires_at, placed_at) "
            "SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM nodes WHERE name = ? AND (lost_at IS NOT NULL "
            "OR (volume_id IS NOT NULL AND volume_seen IS NOT NULL AND volume_seen <> volume_id))) "
            "ON CONFLICT (workspace_id) DO NOTHING",
            (workspace_id, node, iso(now + lease), iso(now), node),
        )
        placed = self.placement(workspace_id)
        if placed is None:
            raise PlacementError(
                f"node {node!r} was declared lost or runs on a volume not its own; nothing is placed on it"
            )
        return placed

    def place(self, workspace_id: str, node: str, *, now: float, lease: float) -> Placement:
        """Where ``workspace_id`` lives: placed on ``node`` (chosen by
        :func:`gateway.cluster.placement.place`) unless it is placed already — whoever inserted first
        decides, and everyone then reads the same node."""
        self._db.execute(
            "INSERT INTO placements (workspace_id, node, lease_expires_at, placed_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (workspace_id) DO NOTHING",
            (workspace_id, node, iso(now + lease), iso(now)),
        )
        placed = self.placement(workspace_id)
        assert placed is not None
        return placed
