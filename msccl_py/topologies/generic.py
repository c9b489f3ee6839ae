"""MSCCLang's generic topologies: fully connected, ring, line, star, hub and spoke.

Signatures and names follow msccl-tools so programs port by changing the
import; ``links`` hold one link per connected pair.
"""

from __future__ import annotations

from msccl_py.errors import TopologyError
from msccl_py.topologies.topology import Constraint, Topology


def _count(num_gpus: int, what: str, minimum: int = 1) -> int:
    if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < minimum:
        raise TopologyError(f"{what}() needs an integer number of GPUs >= {minimum}, "
                            f"got {num_gpus!r}")
    return num_gpus


def fully_connected(num_gpus: int) -> Topology:
    """Every GPU has one link to every other.

    >>> fully_connected(3).links
    [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    """
    n = _count(num_gpus, "fully_connected")
    links = [[0 if s == d else 1 for s in range(n)] for d in range(n)]
    return Topology(f"FullyConnected(n={n})", links)


def ring(num_gpus: int) -> Topology:
    """GPU i links both ways to i±1 (mod n).

    >>> ring(4).link(3, 0), ring(4).link(0, 2)
    (1, 0)
    """
    n = _count(num_gpus, "ring")
    links = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in ((i + 1) % n, (i - 1) % n):
            if j != i:
                links[i][j] = 1
    return Topology(f"Ring(n={n})", links)


def line(num_gpus: int) -> Topology:
    """GPU i links both ways to i-1 and i+1 (no wrap-around).

    >>> line(3).links
    [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    """
    n = _count(num_gpus, "line")
    links = [[1 if abs(s - d) == 1 else 0 for s in range(n)] for d in range(n)]
    return Topology(f"Line(n={n})", links)


def star(num_gpus: int, non_blocking: bool = True) -> Topology:
    """GPU 0 is the hub linked to every other GPU.

    With ``non_blocking=False`` the hub can send (and receive) only one
    link's worth in total, expressed as two switches.

    >>> [name for *_, name in star(4, non_blocking=False).switches]
    ['to_points', 'from_points']
    """
    n = _count(num_gpus, "star")
    links = [[1 if (s == 0) != (d == 0) else 0 for s in range(n)] for d in range(n)]
    switches: list[Constraint] = []
    if not non_blocking and n > 1:
        points = list(range(1, n))
        switches = [([0], points, 1, "to_points"), (points, [0], 1, "from_points")]
    return Topology(f"Star(n={n})", links, switches)


def hub_and_spoke(num_gpus: int) -> Topology:
    """Fully connected, but each GPU sends and receives one link's worth in total.

    >>> len(hub_and_spoke(4).switches)
    8
    """
    n = _count(num_gpus, "hub_and_spoke")
    links = [[0 if s == d else 1 for s in range(n)] for d in range(n)]
    switches: list[Constraint] = []
    for g in range(n):
        others = [o for o in range(n) if o != g]
        switches.append(([g], others, 1, f"node_{g}_out"))
        switches.append((others, [g], 1, f"node_{g}_in"))
    return Topology(f"HubAndSpoke(n={n})", links, switches)
