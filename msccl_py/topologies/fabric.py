"""How a cluster's NICs are wired: one switch, or a rail-optimized leaf/spine(/core) fat tree.

A cluster's ``fabric`` statement (grammar rule ``fabric`` in ``topofile.lark``)::

    fabric rail group 32 spines 16 oversubscription 2 hop 130 ns rail 400 Gb/s
    fabric three-tier group 32 pod 4 spines 32 cores 128 hop 130 ns

* ``flat`` (the default without a statement): every NIC on one non-blocking
  switch; the NICs are the only shared resources between machines.
* ``rail``: rail-optimized two tiers. Machines are cut into leaf groups of
  ``group`` machines (the last may be smaller); NIC *r* of every machine in a
  group sits on the group's leaf switch for rail *r*. A leaf's uplinks carry
  ``members x rail bandwidth / oversubscription`` each way, spread evenly over
  ``spines`` spine switches. Same group and rail: NIC, leaf, NIC (one switch
  hop); otherwise leaf up, a spine, leaf down (three hops).
* ``three-tier``: leaf groups form pods of ``pod`` groups with ``spines``
  spines each; pods meet on ``cores`` core switches (non-blocking above the
  spine). Between pods: leaf up, spine, core, spine, leaf down (five hops).

``hop`` is the latency of one switch hop, added to the cluster's network
latency per switch crossed; ``rail [R] BW`` sets the NIC speed of every rail
(or rail R). A pair's spine (and core) is picked by a fixed hash of its
machines and rails, as static ECMP routing does.

``placement`` says where the job's machines (in rank order: machine *k* holds
ranks ``k x gpus ..``) sit in the leaf groups. NCCL joins its inter-node
rings and trees in that order, so it decides how many ring and tree edges
cross a leaf group's uplinks:

* ``packed`` (the default): machine *k* in slot *k*, groups filled in order, as
  a topology-aware scheduler gives a job (Slurm's ``topology/tree`` plugin
  allocates the fewest leaf switches, https://slurm.schedmd.com/topology.html)
  and as ranks fall when host names follow the racks;
* ``round-robin``: machine *k* in group *k* mod groups, the worst order (every
  consecutive pair in different groups);
* ``scattered [SEED]``: a fixed pseudo-random order (Python's ``random.Random(SEED)``,
  default 0), as a topology-unaware allocation or a host list sorted by
  anything but the cabling gives: Meta's training clusters needed a scheduler
  that learns the servers' places to recommend a rank assignment (Gangidi et
  al., "RDMA over Ethernet for Distributed Training at Meta Scale", SIGCOMM'24).

Resource names (shared with the performance model and the bound):
``leaf gG/rR up``/``down``, ``spine S`` (``spine pP/sS`` in three tiers),
``core C``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: the fabric kinds a ``fabric`` statement may name
KINDS = ("flat", "rail", "three-tier")
#: the rank orders a ``placement`` may name
PLACEMENTS = ("packed", "round-robin", "scattered")
_BW = {"GB/s": 1.0, "Gb/s": 1 / 8, "MB/s": 1e-3, "Mb/s": 1e-3 / 8}
_TIME = {"us": 1.0, "ns": 1e-3, "ms": 1e3}


@dataclass(frozen=True)
class FabricSpec:
    """A parsed ``fabric`` statement (see the module docstring)."""

    kind: str = "flat"
    group: int | None = None
    spines: int | None = None
    pod: int | None = None
    cores: int | None = None
    oversubscription: float = 1.0
    hop_us: float | None = None
    rail_bw: float | None = None                  # GB/s of every rail's NIC
    rails: dict[int, float] = field(default_factory=dict)   # rail -> GB/s
    placement: str = "packed"
    seed: int = 0                                 # of a scattered placement


def parse_fabric(tree, at) -> FabricSpec:
    """A ``fabric`` statement's parse tree as a :class:`FabricSpec`; ``at`` (topofile's
    ``Where``) places errors."""
    kind = str(tree.children[0])
    if kind not in KINDS:
        raise at.error(f"unknown fabric '{kind}'; expected one of {', '.join(KINDS)}")
    values: dict = {"kind": kind, "rails": {}}
    for opt in tree.children[1:]:
        name, args = opt.data, opt.children
        if name == "fabric_rail":
            index, bw = args
            gbs = float(bw.children[0]) * _BW[str(bw.children[1])]
            if gbs <= 0:
                raise at.error("a rail needs a positive bandwidth")
            if index is None:
                values["rail_bw"] = gbs
            else:
                values["rails"][int(float(index))] = gbs
            continue
        if name == "fabric_placement":
            values["placement"] = str(args[0])
            why = _placement_error(values["placement"], args[1] is not None)
            if why:
                raise at.error(why)
            if args[1] is not None:
                values["seed"] = int(float(args[1]))
            continue
        if name == "fabric_hop":
            values["hop_us"] = float(args[0]) * _TIME[str(args[1])]
            continue
        key = name[len("fabric_"):]
        number = float(args[0])
        if key == "oversubscription":
            if number < 1:
                raise at.error(f"oversubscription is a ratio of at least 1 (2 means 2:1), "
                               f"got {args[0]}")
            values[key] = number
            continue
        if number != int(number) or number < 1:
            raise at.error(f"'{key}' must be a positive integer, got {args[0]}")
        values[key] = int(number)
    spec = FabricSpec(**values)
    need = {"flat": (), "rail": ("group", "spines"),
            "three-tier": ("group", "spines", "pod", "cores")}[kind]
    missing = [k for k in need if getattr(spec, k) is None]
    if missing:
        raise at.error(f"fabric {kind} needs {' and '.join(missing)} "
                       f"(e.g. 'fabric rail group 32 spines 16')")
    return spec


@dataclass(frozen=True)
class Hop:
    """One shared fabric resource a transfer crosses (GB/s per direction)."""

    name: str
    bw_GBps: float


class Fabric:
    """A fabric spec applied to ``machines`` machines with ``rails`` NICs each.

    >>> f = Fabric(FabricSpec("rail", group=2, spines=2, oversubscription=2), 4, [50.0])
    >>> [h.name for h in f.route(0, 0, 3, 0)], f.switch_hops(0, 0, 3, 0)
    (['leaf g0/r0 up', 'spine 1', 'leaf g1/r0 down'], 3)
    >>> f.leaf_up(0, 0)
    50.0
    """

    def __init__(self, spec: FabricSpec, machines: int, rail_bw: list[float]):
        self.spec = spec
        self.machines = machines
        self.rail_bw = list(rail_bw)
        self.rails = len(rail_bw)
        self.group = spec.group or machines
        self.groups = -(-machines // self.group)
        self._slots = self._place()

    # ------------------------------------------------------------ structure
    def _place(self) -> list[int] | None:
        """Slot (position in leaf-group order) of each machine; None when packed."""
        kind = self.spec.placement
        if kind == "packed" or self.groups < 2:
            return None
        if kind == "scattered":
            slots = list(range(self.machines))
            random.Random(self.spec.seed).shuffle(slots)
            return slots
        fill, slots, g = [0] * self.groups, [], 0        # round-robin over the groups
        for _ in range(self.machines):
            while fill[g] >= self.members(g):
                g = (g + 1) % self.groups
            slots.append(g * self.group + fill[g])
            fill[g] += 1
            g = (g + 1) % self.groups
        return slots

    def group_of(self, machine: int) -> int:
        """The leaf group of the job's machine ``machine`` (after the placement)."""
        slot = machine if self._slots is None else self._slots[machine]
        return slot // self.group

    def members(self, group: int) -> int:
        """Machines in leaf group ``group`` (the last may be short)."""
        return min(self.group, self.machines - group * self.group)

    def pod_of(self, group: int) -> int:
        return group // (self.spec.pod or self.groups)

    @property
    def pods(self) -> int:
        return -(-self.groups // (self.spec.pod or self.groups))

    def leaf_up(self, group: int, rail: int) -> float:
        """GB/s a leaf switch's uplinks carry each way."""
        return self.members(group) * self.rail_bw[rail] / self.spec.oversubscription

    def leaves(self) -> int:
        return 0 if self.spec.kind == "flat" else self.groups * self.rails

    def spine_count(self) -> int:
        if self.spec.kind == "flat":
            return 0
        return self.spec.spines * (self.pods if self.spec.kind == "three-tier" else 1)

    def spine_bw(self, pod: int = 0) -> float:
        """GB/s through one spine: its share of the leaf uplinks below it."""
        groups = range(self.groups) if self.spec.kind == "rail" else \
            [g for g in range(self.groups) if self.pod_of(g) == pod]
        up = sum(self.leaf_up(g, r) for g in groups for r in range(self.rails))
        return up / self.spec.spines

    def core_bw(self) -> float:
        """GB/s through one core switch: its share of every spine's capacity."""
        total = sum(self.spine_bw(p) * self.spec.spines for p in range(self.pods))
        return total / self.spec.cores

    # --------------------------------------------------------------- routes
    def switch_hops(self, ma: int, ra: int, mb: int, rb: int) -> int:
        """Switches a transfer from machine ``ma``'s rail ``ra`` to ``mb``'s ``rb`` crosses."""
        if self.spec.kind == "flat":
            return 1
        ga, gb = self.group_of(ma), self.group_of(mb)
        if ga == gb and ra == rb:
            return 1
        if self.spec.kind == "three-tier" and self.pod_of(ga) != self.pod_of(gb):
            return 5
        return 3

    def route(self, ma: int, ra: int, mb: int, rb: int) -> list[Hop]:
        """The shared resources between the two NICs (the NICs themselves excluded)."""
        hops = self.switch_hops(ma, ra, mb, rb)
        if hops == 1:
            return []
        ga, gb = self.group_of(ma), self.group_of(mb)
        pick = (ma * 31 + mb * 17 + ra * 7 + rb) % self.spec.spines
        out = [Hop(f"leaf g{ga}/r{ra} up", self.leaf_up(ga, ra))]
        if self.spec.kind == "rail":
            out.append(Hop(f"spine {pick}", self.spine_bw()))
        elif hops == 3:
            pa = self.pod_of(ga)
            out.append(Hop(f"spine p{pa}/s{pick}", self.spine_bw(pa)))
        else:
            pa, pb = self.pod_of(ga), self.pod_of(gb)
            core = (ma * 13 + mb * 29 + ra * 5 + rb) % self.spec.cores
            out += [Hop(f"spine p{pa}/s{pick}", self.spine_bw(pa)),
                    Hop(f"core {core}", self.core_bw()),
                    Hop(f"spine p{pb}/s{pick}", self.spine_bw(pb))]
        out.append(Hop(f"leaf g{gb}/r{rb} down", self.leaf_up(gb, rb)))
        return out

    def leaf_utilization(self, edges) -> tuple[float, str]:
        """The busiest leaf uplink under a traffic pattern among the machines, carried alike
        on every rail: ``edges`` are ``(machine a, machine b, w)``, ``w`` in units of one
        NIC's bandwidth. Returns (load / capacity, ``leaf gG up`` or ``down``); (0, "")
        when nothing leaves a leaf group.

        Only the leaf uplinks are checked: with routing that balances a leaf's traffic
        over its spines (InfiniBand's adaptive routing, on by default in opensm:
        docs.nvidia.com/networking/display/ibclusterbringupprocedure/adaptive+routing),
        a spine's share of the traffic is its share of the uplinks below it, so no spine
        (or core, non-blocking above the spine) is busier than the busiest uplink.

        >>> f = Fabric(FabricSpec("rail", group=2, spines=2, oversubscription=2), 4, [50.0])
        >>> f.leaf_utilization([(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (3, 0, 1.0)])
        (1.0, 'leaf g0 up')
        """
        if self.spec.kind == "flat" or self.groups < 2:
            return 0.0, ""
        up, down = [0.0] * self.groups, [0.0] * self.groups
        for a, b, w in edges:
            ga, gb = self.group_of(a), self.group_of(b)
            if ga != gb:
                up[ga] += w
                down[gb] += w
        best = (0.0, "")
        for g in range(self.groups):
            cap = self.members(g) / self.spec.oversubscription
            for load, side in ((up[g], "up"), (down[g], "down")):
                if load / cap > best[0] + 1e-12:
                    best = (load / cap, f"leaf g{g} {side}")
        return best

    def all_to_all_utilization(self) -> tuple[float, str]:
        """:meth:`leaf_utilization` of an all-to-all: every machine sends each other an equal
        share of one NIC's worth. A group of ``m`` of ``n`` machines sends
        ``m (n - m) / (n - 1)`` over uplinks of ``m / R``, whatever the placement.

        >>> Fabric(FabricSpec("rail", group=2, spines=2, oversubscription=2), 4,
        ...        [50.0]).all_to_all_utilization()
        (1.3333333333333333, 'leaf g0 up')
        """
        if self.spec.kind == "flat" or self.groups < 2:
            return 0.0, ""
        n, best = self.machines, (0.0, "")
        for g in range(self.groups):
            util = self.spec.oversubscription * (n - self.members(g)) / (n - 1)
            if util > best[0] + 1e-12:
                best = (util, f"leaf g{g} up")
        return best

    def latency_us(self, ma: int, ra: int, mb: int, rb: int) -> float:
        """Switch-hop latency of the transfer (0 when the file gives no ``hop``)."""
        return (self.spec.hop_us or 0.0) * self.switch_hops(ma, ra, mb, rb)

    # -------------------------------------------------------------- figures
    def bisection_GBps(self) -> float:
        """GB/s one half of the machines can send the other (per direction), counting the
        NICs and, across leaf groups, the uplinks above the leaves."""
        half = self.machines // 2
        nic = half * sum(self.rail_bw)
        if self.spec.kind == "flat" or self.groups < 2:
            return nic
        # half the machines as whole leaf groups (the fabric's weakest split)
        up, left = 0.0, half
        for g in range(self.groups):
            if left <= 0:
                break
            take = min(left, self.members(g))
            up += sum(take * bw for bw in self.rail_bw) / self.spec.oversubscription
            left -= take
        return min(nic, up)

    def group_uplinks(self, group: int) -> float:
        """GB/s leaf group ``group``'s uplinks carry each way, every rail together."""
        return sum(self.leaf_up(group, r) for r in range(self.rails))

    def allreduce_GBps(self) -> float:
        """The most allreduce algbw (GB/s) the leaf uplinks allow where data is summed only
        inside machines (inf on a flat fabric or one group). A group is then one node of an
        allreduce among the groups, with its uplinks for a NIC: with G groups of equal
        uplinks U each way, ``U G / (2 (G - 1))`` (each node sends and receives
        ``2 (G - 1) / G`` of the buffer: Patarasuk and Yuan, "Bandwidth optimal all-reduce
        algorithms for clusters of workstations", JPDC 69(2), 2009); with unequal groups
        the smallest group's ``U`` (the whole buffer crosses its uplinks each way).

        >>> Fabric(FabricSpec("rail", group=2, spines=2, oversubscription=4), 4,
        ...        [50.0]).allreduce_GBps()
        25.0
        """
        if self.spec.kind == "flat" or self.groups < 2:
            return float("inf")
        ups = [self.group_uplinks(g) for g in range(self.groups)]
        if len(set(ups)) == 1:
            return ups[0] * self.groups / (2 * (self.groups - 1))
        return min(ups)

    def binding_oversubscription(self) -> float:
        """The oversubscription above which a leaf group's uplinks, not one machine's NICs,
        set the cut bound of allgather and reduce-scatter (and, groups equal, of allreduce
        summed inside machines): a group of ``m`` of ``n`` machines takes the others' data
        through ``m / R`` machines' worth of uplinks, a machine through its own NICs, so
        ``R > m (n - 1) / (n - m)`` for the smallest group; inf with one group.

        >>> Fabric(FabricSpec("rail", group=32, spines=16), 128, [50.0]).binding_oversubscription()
        42.333333333333336
        """
        if self.spec.kind == "flat" or self.groups < 2:
            return float("inf")
        m = min(self.members(g) for g in range(self.groups))
        return m * (self.machines - 1) / (self.machines - m)

    def describe(self) -> list[tuple[str, str]]:
        """Rows for ``topology show``."""
        s = self.spec
        speeds = sorted(set(self.rail_bw))
        rails = f"{self.rails} rail{'s' if self.rails != 1 else ''}, " + \
            "/".join(f"{b:g}" for b in speeds) + " GB/s per NIC"
        if s.kind == "flat":
            return [("fabric", "one non-blocking switch"), ("rails", rails)]
        tiers = "two-tier" if s.kind == "rail" else "three-tier"
        shape = (f"rail-optimized {tiers}: {self.groups} leaf groups of {self.group} machines, "
                 f"{self.leaves()} leaves, {self.spine_count()} spines")
        if s.kind == "three-tier":
            shape += f" in {self.pods} pods, {s.cores} cores"
        rows = [("fabric", shape), ("rails", rails),
                ("oversubscription", f"{s.oversubscription:g}:1 above the leaf; the uplinks "
                                     f"set the cut bound above "
                                     f"{self.binding_oversubscription():.3g}:1"),
                ("leaf uplinks", f"{self.leaf_up(0, 0):g} GB/s each way per full leaf")]
        if s.hop_us is not None:
            rows.append(("switch hop latency", f"{s.hop_us * 1e3:g} ns"))
        order = {"packed": "packed (machines in leaf-group order)",
                 "round-robin": "round-robin (consecutive machines in different groups)",
                 "scattered": f"scattered (pseudo-random, seed {s.seed})"}[s.placement]
        rows.append(("placement", order))
        return rows


def of(topo) -> Fabric | None:
    """The :class:`Fabric` of a cluster topology (None for one machine or a plain one)."""
    graph = getattr(topo, "_graph", None)
    if graph is None:
        return None
    return graph.graph.get("fabric")


def _placement_error(kind: str, seeded: bool) -> str | None:
    """What is wrong with a placement named ``kind`` (``seeded``: given a seed), or None."""
    if kind not in PLACEMENTS:
        return (f"unknown placement '{kind}'; expected one of {', '.join(PLACEMENTS)} "
                f"(scattered takes a seed for another order)")
    if seeded and kind != "scattered":
        return (f"only scattered takes a seed (only a scattered placement is shuffled), "
                f"not '{kind}'")
    return None


def place(topo, placement: str) -> None:
    """Put the machines of cluster ``topo`` in ``placement`` order over its leaf groups
    (``packed``, ``round-robin``, ``scattered`` or ``scattered:SEED``), as the file's
    ``placement`` statement would; before the topology is used (``simulate
    --placement``). A TopologyError where it has no leaf/spine fabric."""
    from dataclasses import replace
    from msccl_py.errors import TopologyError
    kind, colon, seed = placement.partition(":")
    why = _placement_error(kind, bool(colon))
    if why:
        raise TopologyError(f"--placement {placement}: {why}")
    if colon and not seed.isdigit():
        raise TopologyError(f"--placement {placement}: a seed is a whole number (scattered:7)")
    fab = of(topo)
    if fab is None or fab.spec.kind == "flat":
        raise TopologyError(f"topology '{topo.name}' has no leaf/spine fabric to place its "
                            f"machines on (a cluster's 'fabric rail ...' statement)")
    spec = replace(fab.spec, placement=kind, seed=int(seed or 0))
    topo.graph.graph["fabric"] = Fabric(spec, fab.machines, fab.rail_bw)


def nic_route(topo, nic_out, nic_in) -> tuple[list[Hop], float]:
    """(fabric resources, switch-hop latency µs) between two NIC nodes of ``topo``;
    ``([], 0.0)`` without a fabric."""
    fab = of(topo)
    if fab is None:
        return [], 0.0
    a, b = topo.graph.nodes[nic_out], topo.graph.nodes[nic_in]
    ends = (a["node"], a.get("rail", 0), b["node"], b.get("rail", 0))
    return fab.route(*ends), fab.latency_us(*ends)


def representative_machines(topo) -> list[int]:
    """Machines standing for all others, seen from machine 0: machine 0, and the first
    machine of each kind (same leaf group as 0 or not, pod, group size).

    Every machine is a copy and the fabric treats alike the machines of a kind, so
    swapping two machines of a kind maps the cluster onto itself: a max-flow from
    machine 0 (or from all ranks at once) to a rank of one has the value it has to the
    same rank of the other. Bounds then need sinks on these machines only.

    >>> from msccl_py.topologies import load
    >>> representative_machines(load("rail-h100-128"))
    [0, 1, 32]
    """
    machines = getattr(topo, "num_machines", 1)
    fab = of(topo)
    seen: dict = {}
    for m in range(machines):
        if fab is None or fab.spec.kind == "flat":
            key: tuple = (m == 0,)
        else:
            g, g0 = fab.group_of(m), fab.group_of(0)
            pod = fab.pod_of(g)
            sizes = tuple(sorted(fab.members(x) for x in range(fab.groups)
                                 if fab.pod_of(x) == pod))
            key = (m == 0, g == g0, pod == fab.pod_of(g0), fab.members(g), sizes)
        seen.setdefault(key, m)
    return sorted(seen.values())
