"""The Topology class: GPUs, links and shared-bandwidth devices over a networkx DiGraph.

MSCCLang programs see a matrix ``links[dst][src]`` (link count, or bandwidth in
the topology's link unit) and a list of ``switches`` (shared-bandwidth
constraints). Here the real data lives in :attr:`Topology.graph`:

* rank nodes ``0..n-1`` (``kind="gpu"``, ``node`` = machine index in a cluster,
  ``local`` = index inside the machine, ``label``);
* rank → rank edges for point-to-point links (``count``, ``bw`` in GB/s per
  direction, ``kind`` such as ``"nvlink"``, optional ``latency`` in µs and
  ``via`` naming the switch that carries the pair);
* device nodes (strings) for switches (``kind="switch"``), NICs (``kind="nic"``)
  and the inter-node fabric (``kind="fabric"``), joined to ranks by
  ``kind="attach"`` edges. Ranks on different machines talk through
  rank → NIC → fabric → NIC → rank; the matrix shows such pairs as one link of
  the smaller NIC bandwidth, and each NIC is a shared constraint.

The matrix is derived from the graph once, with NumPy, and cached.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from msccl_py.errors import TopologyError

if TYPE_CHECKING:  # networkx is imported where a graph is built: programs only query links
    import networkx as nx

Constraint = tuple[list[int], list[int], float, str]


def _plain(value: float) -> int | float:
    """Show integral link values as ints, like MSCCLang's matrices."""
    return int(value) if float(value).is_integer() else float(value)


class Topology:
    """A machine or cluster: ranks, links and shared-bandwidth constraints.

    ``Topology(name, links, switches)`` is MSCCLang's constructor: ``links[dst][src]``
    is the number of links (any positive number) and ``switches`` a list of
    ``(srcs, dsts, bandwidth, name)``. Topology files build richer graphs
    through :meth:`from_graph`.

    >>> t = Topology("pair", [[0, 2], [2, 0]])
    >>> t.link(0, 1), t.num_nodes(), list(t.destinations(0))
    (2, 2, [1])
    """

    def __init__(self, name: str, links: Sequence[Sequence[float]],
                 switches: Iterable[Constraint] = (), *, unit_bw: float | None = None):
        matrix = _check_matrix(name, links)
        scale = 1.0 if unit_bw is None else float(unit_bw)
        # the graph is built on first use: a 512-rank matrix is 262,144 edges that
        # link queries (all a program needs) never look at
        self._setup(name, None, matrix.shape[0], list(switches), scale,
                    "GB/s" if unit_bw else "links")
        self._matrix = matrix

    @classmethod
    def from_graph(cls, name: str, graph: nx.DiGraph, *, unit_bw: float | None = None,
                   constraints: Iterable[Constraint] = (), title: str | None = None,
                   source: str | None = None, machine: str | None = None,
                   num_machines: int = 1) -> "Topology":
        """Wrap a graph laid out as described in the module docstring.

        ``unit_bw`` is the bandwidth (GB/s) of one unit of ``links``; ``None``
        means the graph's ``bw`` values are themselves link counts.

        >>> import networkx as nx
        >>> g = nx.DiGraph()
        >>> g.add_nodes_from([(0, {"kind": "gpu"}), (1, {"kind": "gpu"})])
        >>> g.add_edge(0, 1, count=1, bw=25.0, kind="nvlink")
        >>> Topology.from_graph("one-way", g, unit_bw=25.0).links
        [[0, 0], [1, 0]]
        """
        ranks = [v for v in graph.nodes if isinstance(v, int)]
        if sorted(ranks) != list(range(len(ranks))):
            raise TopologyError(f"topology '{name}': rank nodes must be 0..n-1, "
                                f"got {sorted(ranks)[:8]}")
        self = cls.__new__(cls)
        self._setup(name, graph, len(ranks), list(constraints),
                    1.0 if unit_bw is None else float(unit_bw), "GB/s" if unit_bw else "links")
        self.title = title or name
        self.source = source
        self.machine = machine or name
        self.num_machines = num_machines
        return self

    def _setup(self, name: str, graph: nx.DiGraph, n: int, constraints: list[Constraint],
               unit_bw: float, unit: str) -> None:
        for c in constraints:
            _check_constraint(name, n, c)
        self.name = name
        self._graph = graph
        self._matrix: np.ndarray | None = None
        self.title = name
        self.source = None
        self.machine = name
        self.num_machines = 1
        self.model = None
        self.cpu_vendor: str | None = None     # amd, intel, arm (the file's ``cpu``)
        self.gpus_per_node = n
        self.network_kind: str | None = None   # ib, roce, efa, tcpxo (topologies/networks.py)
        self.unit_bw = unit_bw
        self.bandwidth_unit = unit
        self._n = n
        self._explicit = constraints
        self._units: np.ndarray | None = None
        self._links: list[list[int | float]] | None = None
        self._switches: list[Constraint] | None = None

    @property
    def graph(self) -> nx.DiGraph:
        """The networkx graph (module docstring), built on first use for a matrix topology."""
        if self._graph is None:
            self._graph = _matrix_graph(self.name, self._matrix, self.unit_bw)
        return self._graph

    # ------------------------------------------------------------ MSCCLang API
    @property
    def links(self) -> list[list[int | float]]:
        """``links[dst][src]``: links from src to dst in link units (0 = none)."""
        if self._links is None:
            units = self.units_matrix()
            if np.all(units == np.round(units)):
                self._links = units.astype(np.int64).tolist()
            else:
                self._links = units.tolist()
        return self._links

    @property
    def switches(self) -> list[Constraint]:
        """Shared-bandwidth constraints ``(srcs, dsts, bandwidth, name)`` in link units."""
        if self._switches is None:
            self._switches = self._explicit + self._derived_constraints()
        return self._switches

    def num_nodes(self) -> int:
        """Number of ranks (MSCCLang calls them nodes)."""
        return self._n

    def nodes(self) -> range:
        return range(self._n)

    def sources(self, dst: int) -> Iterator[int]:
        """Ranks with a link into ``dst``."""
        self._check_rank(dst)
        yield from np.nonzero(self.units_matrix()[dst])[0].tolist()

    def destinations(self, src: int) -> Iterator[int]:
        """Ranks that ``src`` has a link to."""
        self._check_rank(src)
        yield from np.nonzero(self.units_matrix()[:, src])[0].tolist()

    def link(self, src: int, dst: int) -> int | float:
        """Links from ``src`` to ``dst`` in link units; 0 when there is none.

        >>> Topology("ring3", [[0, 1, 1], [1, 0, 1], [1, 1, 0]]).link(2, 0)
        1
        """
        self._check_rank(src)
        self._check_rank(dst)
        return _plain(self.units_matrix()[dst, src])

    def bandwidth_constraints(self) -> Iterator[Constraint]:
        """Every link as a one-pair constraint, then every switch, as MSCCLang does."""
        units = self.units_matrix()
        dst, src = np.nonzero(units)
        for d, s in zip(dst.tolist(), src.tolist()):
            yield ([s], [d], _plain(units[d, s]), f"{s}→{d}")
        yield from self.switches

    # ----------------------------------------------------------- bandwidths
    def units_matrix(self) -> np.ndarray:
        """``[dst, src]`` float matrix of link units (read-only, cached)."""
        if self._units is None:
            self._units = self._derive_units()
            self._units.setflags(write=False)
        return self._units

    def bandwidth(self, src: int, dst: int) -> float:
        """GB/s per direction from ``src`` to ``dst`` (link units if the topology has none)."""
        return float(self.link(src, dst)) * self.unit_bw

    def bandwidth_matrix(self) -> np.ndarray:
        """``B[src, dst]`` in GB/s per direction (note: src first, unlike ``links``).

        >>> float(Topology("p", [[0, 3], [1, 0]], unit_bw=25).bandwidth_matrix()[0, 1])
        25.0
        """
        return self.units_matrix().T * self.unit_bw

    # ------------------------------------------------------------- structure
    def node_of(self, rank: int) -> int:
        """Index of the machine (cluster node) holding ``rank``."""
        self._check_rank(rank)
        return int(self.graph.nodes[rank].get("node", 0))

    def ranks_of_node(self, node: int) -> list[int]:
        return [r for r in range(self._n) if self.graph.nodes[r].get("node", 0) == node]

    def devices(self, kind: str | None = None) -> list[Any]:
        """Switch, NIC and fabric nodes of the graph (optionally of one kind)."""
        return [v for v, k in self.graph.nodes(data="kind")
                if not isinstance(v, int) and (kind is None or k == kind)]

    def nics_of(self, rank: int) -> list[Any]:
        return [v for v in self.graph.successors(rank) if self.graph.nodes[v].get("kind") == "nic"]

    def hops(self, src: int, dst: int) -> int | None:
        """Fewest link hops from ``src`` to ``dst`` (None when unreachable)."""
        path = self.rank_route(src, dst)
        return None if path is None else len(path) - 1

    def rank_route(self, src: int, dst: int) -> list[int] | None:
        """Ranks on a fewest-hop path over the links (None when unreachable).

        >>> Topology("line3", [[0, 1, 0], [1, 0, 1], [0, 1, 0]]).rank_route(0, 2)
        [0, 1, 2]
        """
        self._check_rank(src)
        self._check_rank(dst)
        adj = self.units_matrix().T > 0
        parent = np.full(self._n, -1)
        parent[src] = src
        frontier = np.zeros(self._n, dtype=bool)
        frontier[src] = True
        while parent[dst] < 0 and frontier.any():
            nxt = adj[frontier].any(axis=0) & (parent < 0)
            if not nxt.any():
                return None
            srcs = np.nonzero(frontier)[0]
            for v in np.nonzero(nxt)[0]:
                parent[v] = srcs[np.argmax(adj[srcs, v])]
            frontier = nxt
        if parent[dst] < 0:
            return None
        path = [dst]
        while path[-1] != src:
            path.append(int(parent[path[-1]]))
        return path[::-1]

    def route(self, src: int, dst: int) -> list[Any]:
        """Physical path from ``src`` to ``dst``: ranks, and NICs/fabric between machines.

        >>> Topology("line3", [[0, 1, 0], [1, 0, 1], [0, 1, 0]]).route(2, 0)
        [2, 1, 0]
        """
        ranks = self.rank_route(src, dst)
        if ranks is None:
            raise TopologyError(f"topology '{self.name}': no path from rank {src} to rank {dst}")
        path: list[Any] = [ranks[0]]
        for a, b in zip(ranks, ranks[1:]):
            if not self.graph.has_edge(a, b):
                path.extend(self._network_hop(a, b))
            path.append(b)
        return path

    def _network_hop(self, a: int, b: int) -> list[Any]:
        best = max(((self.graph.nodes[na]["bw"], na, nb) for na in self.nics_of(a)
                    for nb in self.nics_of(b)), key=lambda t: t[0])
        fabric = next(iter(self.devices("fabric")))
        return [best[1], fabric, best[2]]

    def reachability(self) -> np.ndarray:
        """``R[src, dst]``: whether dst is reachable from src over links."""
        adj = (self.units_matrix().T > 0).astype(np.float32)
        reach = np.eye(self._n, dtype=bool) | (adj > 0)
        while True:
            grown = reach | ((reach.astype(np.float32) @ adj) > 0)
            if np.array_equal(grown, reach):
                return reach
            reach = grown

    def diameter(self) -> int | None:
        """Largest fewest-hop distance between two ranks (None if some pair is unreachable)."""
        adj = (self.units_matrix().T > 0).astype(np.float32)
        reach = np.eye(self._n, dtype=bool)
        hops = 0
        while not reach.all():
            grown = reach | ((reach.astype(np.float32) @ adj) > 0)
            if np.array_equal(grown, reach):
                return None
            reach = grown
            hops += 1
        return hops

    def unreachable(self, pairs: Iterable[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
        """The (src, dst) pairs, of those given (default: all), with no path.

        >>> Topology("one-way", [[0, 0], [1, 0]]).unreachable([(0, 1), (1, 0)])
        [(1, 0)]
        """
        reach = self.reachability()
        if pairs is None:
            src, dst = np.nonzero(~reach)
            return list(zip(src.tolist(), dst.tolist()))
        out = []
        for s, d in pairs:
            self._check_rank(s)
            self._check_rank(d)
            if not reach[s, d]:
                out.append((s, d))
        return out

    def connected(self, pairs: Iterable[tuple[int, int]] | None = None) -> bool:
        """Whether every given pair (default: every pair) is connected by some path."""
        return not self.unreachable(pairs)

    # ---------------------------------------------------------- derivation
    def _derive_units(self) -> np.ndarray:
        n = self._n
        if self._graph is None:  # a matrix topology: the graph's bw / unit_bw, without it
            units = np.zeros((n, n))
            nz = self._matrix != 0
            units[nz] = self._matrix[nz] * self.unit_bw / self.unit_bw
            return units
        units = np.zeros((n, n))
        edges = [(u, v, bw) for u, v, bw in self.graph.edges(data="bw")
                 if isinstance(u, int) and isinstance(v, int)]
        if edges:
            u, v, bw = (np.array(x) for x in zip(*edges))
            units[v.astype(int), u.astype(int)] = bw.astype(float) / self.unit_bw
        if self.devices("fabric"):
            nic_bw = np.zeros(n)
            for nic in self.devices("nic"):
                data = self.graph.nodes[nic]
                for r in data["gpus"]:
                    nic_bw[r] = max(nic_bw[r], data["bw"])
            machine = np.array([self.graph.nodes[r].get("node", 0) for r in range(n)])
            remote = (machine[:, None] != machine[None, :]) & (units == 0)
            net = np.minimum.outer(nic_bw, nic_bw) / self.unit_bw
            units[remote] = net[remote]
        return units

    def _derived_constraints(self) -> list[Constraint]:
        out: list[Constraint] = []
        scale = self.unit_bw
        for dev in self.devices("switch"):
            data = self.graph.nodes[dev]
            group = list(data["gpus"])
            if data.get("port_bw"):
                port = _plain(data["port_bw"] / scale)
                for g in group:
                    others = [o for o in group if o != g]
                    out.append(([g], others, port, f"{dev}_{g}_out"))
                    out.append((others, [g], port, f"{dev}_{g}_in"))
            if data.get("total_bw"):
                out.append((group, group, _plain(data["total_bw"] / scale), f"{dev}_total"))
        if self.devices("fabric"):
            for nic in self.devices("nic"):
                data = self.graph.nodes[nic]
                local = list(data["gpus"])
                node = data.get("node", 0)
                remote = [r for r in range(self._n) if self.graph.nodes[r].get("node", 0) != node]
                bw = _plain(data["bw"] / scale)
                out.append((local, remote, bw, f"{nic}_out"))
                out.append((remote, local, bw, f"{nic}_in"))
        return out

    def _check_rank(self, rank: int) -> None:
        if not isinstance(rank, (int, np.integer)) or not 0 <= rank < self._n:
            raise TopologyError(f"rank {rank!r} out of range for topology '{self.name}' "
                                f"with {self._n} ranks")

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, ranks={self._n}, machines={self.num_machines})"


def _matrix_graph(name: str, matrix: np.ndarray, scale: float) -> nx.DiGraph:
    import networkx as nx
    n = matrix.shape[0]
    graph = nx.DiGraph(name=name)
    graph.add_nodes_from((r, {"kind": "gpu", "node": 0, "local": r, "label": f"GPU{r}"})
                         for r in range(n))
    dst, src = np.nonzero(matrix)
    graph.add_edges_from((int(s), int(d), {"count": _plain(matrix[d, s]),
                                           "bw": float(matrix[d, s]) * scale, "kind": "link"})
                         for d, s in zip(dst.tolist(), src.tolist()))
    return graph


def _check_matrix(name: str, links: Sequence[Sequence[float]]) -> np.ndarray:
    try:
        matrix = np.array(links, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TopologyError(f"topology '{name}': links must be a square matrix of numbers "
                            f"({exc})") from None
    if matrix.size == 0:
        matrix = matrix.reshape(0, 0)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise TopologyError(f"topology '{name}': links must be a square matrix, "
                            f"got shape {matrix.shape}")
    if (matrix < 0).any() or not np.isfinite(matrix).all():
        d, s = np.argwhere((matrix < 0) | ~np.isfinite(matrix))[0]
        raise TopologyError(f"topology '{name}': links[{d}][{s}] = {matrix[d, s]} "
                            f"must be a non-negative number")
    return matrix


def _check_constraint(name: str, n: int, c: Constraint) -> None:
    try:
        srcs, dsts, bw, label = c
    except (TypeError, ValueError):
        raise TopologyError(f"topology '{name}': a switch must be (srcs, dsts, bandwidth, name), "
                            f"got {c!r}") from None
    if not isinstance(bw, (int, float)) or bw <= 0:
        raise TopologyError(f"topology '{name}': switch {label} has bandwidth {bw!r}; "
                            f"switch bandwidths must be positive (encode connectivity in links)")
    for r in list(srcs) + list(dsts):
        if not isinstance(r, (int, np.integer)) or not 0 <= r < n:
            raise TopologyError(f"topology '{name}': switch {label} names rank {r!r}, "
                                f"outside 0..{n - 1}")
