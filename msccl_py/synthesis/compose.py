"""Clusters composed: one machine's schedule, and one across machines per rail.

An allreduce on ``K`` machines of ``G`` GPUs each, every GPU with a NIC of
its own (a *rail*: local GPU ``s`` of every machine), needs each machine to
send ``2 (K - 1) / K`` of the buffer through its NICs, and the machine's own
links have room to spare. So the schedule is composed of two small ones:

* **per machine**: each GPU ``s`` owns ``1/G`` of the buffer (its *shard*);
  the machine reduces every shard onto its owner and, at the end, copies the
  result back out, along the machine's own tree packing
  (:func:`~msccl_py.synthesis.packing.pack` on one machine: the LP, a star
  per owner on an NVSwitch);
* **per rail**: the ``K`` owners of a shard allreduce it around a ring of the
  machines in order (on a leaf/spine fabric, machines of one leaf group are
  consecutive, so a rail's ring crosses the spines only between groups).

The two overlap: each shard is cut into ``K`` blocks (the ring's), and the
machine reduces a shard's blocks in the order the ring needs them, and copies
them out in the order the ring finishes them, one block at first and then
more per step (:data:`GROW`), so the NICs start after one block and the
machine's links finish one block after them. A ring of ``K`` takes
``2 (K - 1)`` steps per rank; where that is more than the target allows one
threadblock, the ring's blocks alternate over several channels
(``ring_channels``), each a threadblock with its share of the steps, all
streaming at once (a block keeps its channel around the ring). Otherwise,
since one threadblock is slower than a NIC, two rings run in opposite
directions (*halves*: two connections per NIC, each half the data).

**Two ways** (past :data:`ONE_WAY_UP_TO` machines). A ring is a chain of
``2 (K - 1)`` NIC hops, each costing the network's α and the first granule the
next machine must hold before it forwards (Simple: a 512 KiB FIFO slot at a
threadblock's rate), 22.5 µs per hop on DGX H100 against the 21 µs a 1 MiB
block takes on a NIC at 128 machines: there the chain, not the NICs, sets the
pace (87.6% of the bound). Two ways, each block's partial sums come from both
sides of the ring at once (``K/2`` machines each) and meet at its owner, whose
result goes back out both ways (:func:`rail`): the same bytes per NIC, half the
chain. Each direction is a lane of its own, and the machine's part is split by
side, so each side's blocks stay contiguous (few machine steps). Schedules
that move the data in phases over different peers (2-D rings, recursive
halving) do not help under the performance model: it gives each connection a
fixed share of its NIC, by bytes, for the whole call, so a connection used in
one short phase runs at its small share then.

The program is written compactly (the machine's trees, the rail's ring order
and the parameters; a short walker builds the steps): its text grows only by
the ring's list of machines, and the lowered program is linear in ranks.

>>> from msccl_py.topologies import load
>>> plan = composed_plan(load("dgx-h100", nodes=4), 258.1)
>>> plan.halves, plan.ring_channels, plan.chunks, plan.two_way
(2, 1, 64, False)
>>> [step for step in rail(4, 0, two_way=True)]   # (reduces?, direction, block offset)
[[(True, 1, 2), (True, -1, -1)], [(True, 1, 1)], [(False, 1, 0), (False, -1, 0)], [(False, -1, 1)]]
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

from msccl_py.errors import MscclError

#: a lane runs at most this share of the threadblock limit (as ``schedule.LANE_HEADROOM``)
HEADROOM = 0.9
#: machines above which each rail reduces every block from both sides of its ring at once
#: (``rail``): a ring of K machines is a chain of 2 (K - 1) NIC hops, and past this it is
#: the chain, not the NICs, that sets the pace (see the module docstring)
ONE_WAY_UP_TO = 64
#: a machine step moves 1 + GROW x the blocks before it (raised until a threadblock's steps
#: fit the target): under a GPU's Simple budget (NCCL's NVLink figure) the machine's
#: connections into an owner barely outrun its NIC, so small steps keep the NIC fed (DGX
#: H100 x 16 at 1 GiB: 91.1% of the bound at 0.05, 83.6% at 0.2)
GROW = 0.05


@dataclass(frozen=True)
class ComposedPlan:
    """The parameters of a composed allreduce (see the module docstring)."""

    gpus: int                      # G: GPUs per machine (every one with a NIC)
    nodes: int                     # K: machines
    ring: tuple[int, ...]          # machines in ring order (position -> machine)
    local_in: tuple[tuple[tuple[int, int], ...], ...]   # per owner: (child, parent) leaves first
    local_out: tuple[tuple[tuple[int, int], ...], ...]  # per owner: (parent, child) root first
    halves: int                    # 1, or 2 rings in opposite directions
    ring_channels: int             # channels a ring's blocks alternate over
    intra_channels: int            # channels the machine's steps alternate over, per half
    grow: float                    # machine steps grow by this share of the blocks before
    two_way: bool = False          # the rail reduces each block from both sides (``rail``)

    @property
    def chunks(self) -> int:
        """Chunks in each rank's buffer: G shards x halves x K blocks."""
        return self.gpus * self.halves * self.nodes

    @property
    def ranks(self) -> int:
        return self.gpus * self.nodes


def composed_plan(topo, algbw: float, max_steps: int = 64, hop_table=None,
                  two_way: bool | None = None) -> ComposedPlan:
    """The composed allreduce's plan for cluster ``topo``, aiming at ``algbw`` GB/s (the
    bound), whose threadblocks hold at most ``max_steps`` steps. Raises where a GPU has
    no NIC (the rails need one each)."""
    from msccl_py.synthesis.packing import pack
    per = topo.gpus_per_node
    nodes = topo.num_machines
    if nodes < 2:
        raise MscclError(f"topology '{topo.name}' is one machine: nothing to compose")
    if not all(topo.nics_of(r) for r in range(per)):
        raise MscclError(f"topology '{topo.name}': not every GPU of a machine has a NIC, so "
                         f"the machines cannot be joined rail by rail (GPUs without one: "
                         f"{[r for r in range(per) if not topo.nics_of(r)]})")
    local = hop_table if hop_table is not None else _machine_hops(topo)
    trees = {}
    for kind in ("in", "out"):
        p = pack(local, (kind,))
        best: dict = {}
        for t, w in zip(p.trees, p.weights):   # the heaviest tree of each owner
            if w > best.get(t.root, (None, -1.0))[1]:
                best[t.root] = (t, float(w))
        trees[kind] = [best[s][0] for s in range(per)]
    local_in = tuple(tuple((v, t.parent[v]) for v in _leaves_first(t)) for t in trees["in"])
    local_out = tuple(tuple((t.parent[v], v) for v in reversed(_leaves_first(t)))
                      for t in trees["out"])
    if two_way is None:
        two_way = nodes > ONE_WAY_UP_TO
    ring_channels = 1
    while _rail_steps(nodes, 1, ring_channels, two_way) > max_steps:
        ring_channels += 1
    # one threadblock is slower than a NIC: two rings in opposite directions where they fit
    # (two ways, each block already comes from both)
    halves = 2 if ring_channels == 1 and not two_way else 1
    tb = (local.threadblock_bw or math.inf) * HEADROOM
    # while the ring reduces, each machine connection into an owner feeds what the owner's
    # NIC sends: one block per ring step (per half)
    nic = algbw * 2 * (nodes - 1) / nodes / per   # GB/s each NIC carries at the bound
    parts = halves * (2 if two_way else 1)   # machine parts: each feeds a ring or a side
    intra = max(1, math.ceil(nic / parts / tb)) if math.isfinite(tb) else 1
    # two ways, a machine part feeds half a NIC: up to twice the channels it needs before
    # its steps grow (larger steps stall the rail: 16 x DGX H100 at 1 GiB loses 7 points
    # of the bound from GROW 0.05 to 0.2, 128 x DGX H100 two ways 3 from 2 channels to 1)
    most_intra = 2 * intra if two_way else intra
    grow = GROW
    while _intra_steps(nodes, halves, intra, grow, ring_channels, local_in, local_out,
                       two_way) > max_steps:
        if intra < most_intra:
            intra += 1
        else:
            grow *= 1.5
    return ComposedPlan(per, nodes, tuple(range(nodes)), local_in, local_out, halves,
                        ring_channels, intra, round(grow, 4), two_way)


def ring_form(plan: ComposedPlan) -> str:
    """How the plan's rail ring runs, in words (for the program's docstring)."""
    channels = f"{plan.ring_channels} channel{'s' if plan.ring_channels > 1 else ''}"
    if plan.two_way:
        return f"two ways: each block reduced from both sides at once, {channels} per way"
    return f"{plan.halves} ring{'s' if plan.halves > 1 else ''} per rail, {channels} each"


def _machine_hops(topo):
    """The hops of one machine of the cluster (every machine is a copy)."""
    from msccl_py.synthesis.hops import hops
    from msccl_py.topologies.gpus import first_node
    return hops(first_node(topo))


def _leaves_first(t) -> list[int]:
    """Non-root vertices of tree ``t``, deepest first, then in local order counted from the
    root (so every owner's steps are a rotation of owner 0's: the simulator's fast path
    proves such symmetries and times one rank of each kind)."""
    depth = {}

    def d(v):
        if v not in depth:
            depth[v] = 0 if t.parent[v] < 0 else 1 + d(t.parent[v])
        return depth[v]
    n = len(t.parent)
    return sorted((v for v in range(n) if t.parent[v] >= 0),
                  key=lambda v: (-d(v), (v - t.root) % n))


def groups(blocks, grow):
    """Block counts of the machine's steps in the ring's order: one block at first (the
    ring starts after one), then 1 + grow x the blocks before, so the machine, faster
    than the ring by about that share, keeps ahead of it with few steps."""
    out, left = [], blocks
    while left:
        out.append(min(left, 1 + int(grow * (blocks - left))))
        left -= out[-1]
    return out


def runs(order, sizes):
    """(group, first block, blocks) of each contiguous run of each group of order."""
    out, k = [], 0
    for g, m in enumerate(sizes):
        part = sorted(order[k:k + m])
        k += m
        start = prev = part[0]
        for b in part[1:]:
            if b != prev + 1:
                out.append((g, start, prev - start + 1))
                start = b
            prev = b
        out.append((g, start, prev - start + 1))
    return out


def rail(nodes, h, two_way=False):
    """Half h's allreduce among the rail's positions, step by step: each step a list of
    (reduces?, direction, offset): every position pos sends block pos + offset to position
    pos + direction. One way: around the ring, 2 (K - 1) steps. Two ways: each block's
    partial sums come from both sides at once, ``left`` machines up the ring and the rest
    down, and meet at its owner (position = block); its result goes back out both ways:
    about K steps in all."""
    if not two_way:
        d = 1 - 2 * h
        return ([[(True, d, -d * (t + 1))] for t in range(nodes - 1)]
                + [[(False, d, -d * t)] for t in range(nodes - 1)])
    left, right = _sides(nodes)
    steps = range(max(left, right))
    return ([[(True, 1, left - i)] * (i < left) + [(True, -1, i - right)] * (i < right)
             for i in steps]
            + [[(False, 1, -i)] * (i < right) + [(False, -1, i)] * (i < left) for i in steps])


def _sides(nodes):
    """Two ways: the machines whose partial sums of a block come up the ring (the longer
    chain, so the owner's last reduction is the one that sends its result up) and down."""
    left = nodes // 2
    return left, nodes - 1 - left


def need(pos, h, nodes, two_way=False, side=0):
    """Blocks in the order position pos sends them while half h's rail reduces, its own
    last. Two ways, per side: 0 those it sends up the ring, 1 those it sends down (each
    side's blocks contiguous, so the machine moves them in few runs)."""
    if two_way:
        left, right = _sides(nodes)
        if side == 0:
            return [(pos + left - i) % nodes for i in range(left)]
        return [(pos - right + i) % nodes for i in range(right)] + [pos]
    d = 1 - 2 * h
    return [(pos - d * (t + 1)) % nodes for t in range(nodes)]


def done(pos, h, nodes, two_way=False, side=0):
    """Blocks in the order half h's rail finishes them at position pos: its own, then those
    it receives (two ways, per side: 0 from below, 1 from above)."""
    if two_way:
        left, right = _sides(nodes)
        if side == 0:
            return [pos] + [(pos - 1 - i) % nodes for i in range(right)]
        return [(pos + 1 + i) % nodes for i in range(left)]
    d = 1 - 2 * h
    return [(pos - d * t) % nodes for t in range(nodes)]


def _rail_steps(nodes: int, halves: int, ring_channels: int, two_way: bool) -> int:
    """Most steps a rail threadblock takes: per direction and channel, the blocks a position
    sends or receives in each phase (a receive it forwards fuses with the send)."""
    touched = set()
    for h in range(halves):
        for step in rail(nodes, h, two_way):
            for red, d, o in step:
                lane = 2 * h + (d < 0) if two_way else h
                touched.add((lane, red, o % nodes))         # position 0 sends
                touched.add((lane, red, (o - d) % nodes))   # and receives from -d
    count: dict = {}
    for lane, _, b in touched:
        key = (lane, b % ring_channels)
        count[key] = count.get(key, 0) + 1
    return max(count.values())


def _intra_steps(nodes: int, halves: int, channels: int, grow: float, ring_channels: int,
                 local_in, local_out, two_way: bool = False) -> int:
    """Most XML steps a machine threadblock takes: per channel, the runs it moves times the
    sends one rank makes to one peer (or receives from one) per run; a run copied out
    after the ring waits on one rail step per rail channel it spans (an XML step names
    one dependency: the writer adds a nop for each other)."""
    sends: dict = {}
    for table, kind in ((local_in, 0), (local_out, 1)):
        for hops in table:
            for a, b in hops:
                sends[a, b, kind] = sends.get((a, b, kind), 0) + 1
    per_run = [max((n for (_, _, k), n in sends.items() if k == kind), default=0)
               for kind in (0, 1)]
    most = 0
    for h in range(halves):
        for side in range(2 if two_way else 1):
            for pos in range(nodes):
                count = [0] * channels
                for kind, order in ((0, need(pos, h, nodes, two_way, side)),
                                    (1, done(pos, h, nodes, two_way, side))):
                    sizes = groups(len(order), grow)
                    for g, _, m in runs(order, sizes[::-1] if kind else sizes):
                        count[g % channels] += per_run[kind] * (min(m, ring_channels)
                                                                if kind else 1)
                most = max(most, *count)
    return most


WALK = '''
def program(protocol=PROTOCOL, instances=INSTANCES):
    """The composed allreduce as an MSCCLProgram (not yet written out)."""
    topology = load(TOPOLOGY, nodes=NODES)
    K, G, H = len(RING), GPUS, HALVES
    with MSCCLProgram(NAME, topology, AllReduce(G * K, G * H * K, True), instances,
                      protocol=protocol, instr_fusion=True) as prog:
        def rank(pos, s):
            return RING[pos] * G + s

        def index(s, h, b):
            return (s * H + h) * K + b

        sides = 2 if TWO_WAY else 1   # two ways: each direction a lane and a machine part

        def ring_ch(h, d, b):
            return (sides * h + (TWO_WAY and d < 0)) * RING_CHANNELS + b % RING_CHANNELS

        def local_ch(h, side, g):
            return sides * H * RING_CHANNELS + (h * sides + side) * INTRA_CHANNELS + \
                g % INTRA_CHANNELS

        def parts(blocks):
            """(half, side, position, the blocks that part of the machine moves, in order)."""
            return [(h, side, pos, blocks(pos, h, K, TWO_WAY, side)) for h in range(H)
                    for side in range(sides) for pos in range(K)]

        # 1. each machine reduces every shard onto its owner, blocks as the ring needs them
        for h, side, pos, order in parts(need):
            for g, b, m in runs(order, groups(len(order), GROW)):
                for s in range(G):
                    for a, t in LOCAL_IN[s]:
                        chunk(rank(pos, t), Buffer.input, index(s, h, b), m).reduce(
                            chunk(rank(pos, a), Buffer.input, index(s, h, b), m),
                            ch=local_ch(h, side, g))
        # 2. each rail's owners allreduce their shard among the machines (``rail``)
        for h in range(H):
            for step in rail(K, h, TWO_WAY):
                for pos in range(K):
                    for red, d, o in step:
                        b = (pos + o) % K
                        for s in range(G):
                            src = chunk(rank(pos, s), Buffer.input, index(s, h, b))
                            if red:
                                chunk(rank((pos + d) % K, s), Buffer.input,
                                      index(s, h, b)).reduce(src, ch=ring_ch(h, d, b))
                            else:
                                src.copy(rank((pos + d) % K, s), Buffer.input, index(s, h, b),
                                         ch=ring_ch(h, d, b))
        # 3. each machine copies every owner's results out, blocks as the ring finishes them
        for h, side, pos, order in parts(done):
            for g, b, m in runs(order, groups(len(order), GROW)[::-1]):
                for s in range(G):
                    for a, t in LOCAL_OUT[s]:
                        chunk(rank(pos, a), Buffer.input, index(s, h, b), m).copy(
                            rank(pos, t), Buffer.input, index(s, h, b),
                            ch=local_ch(h, side, g))
    return prog
'''


#: the helpers the program's walker shares with this module (the same text)
HELPERS = "\n\n" + "\n\n".join(inspect.getsource(f) for f in (groups, runs, rail, _sides, need, done))


def composed_source(plan: ComposedPlan, name: str, topology: str, nodes: int | None,
                    summary: list[str], protocol: str = "Simple", instances: int = 1) -> str:
    """The readable MSCCLang program of ``plan`` (``topology`` as ``load`` takes it)."""
    doc = "\n".join(summary)
    ring = ", ".join(map(str, plan.ring))

    def hops(table):
        return "(\n" + "".join(f"    ({', '.join(f'({a}, {b})' for a, b in hs)},),\n"
                                for hs in table) + ")"
    return f'''"""{doc}
"""

import argparse

from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.topologies import load

NAME = {name!r}
TOPOLOGY = {topology!r}
NODES = {nodes!r}
GPUS = {plan.gpus}  # GPUs per machine; local GPU s owns shard s and sits on rail s
RING = ({ring},)  # each rail's ring: machines in order
HALVES = {plan.halves}  # rings per rail (two run in opposite directions)
TWO_WAY = {plan.two_way}  # each block reduced from both sides of the ring at once
RING_CHANNELS = {plan.ring_channels}  # channels a ring's blocks alternate over
INTRA_CHANNELS = {plan.intra_channels}  # channels a machine's steps alternate over, per half
GROW = {plan.grow}  # a machine step moves 1 + GROW x the blocks before it
PROTOCOL = {protocol!r}
INSTANCES = {instances}

# each owner's tree inside a machine (the machine's packing): reduce (child, parent), leaves first
LOCAL_IN = {hops(plan.local_in)}
# and copy (parent, child), root first
LOCAL_OUT = {hops(plan.local_out)}
{HELPERS}{WALK}

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default=PROTOCOL, choices=["Simple", "LL", "LL128"])
    parser.add_argument("--instances", type=int, default=INSTANCES)
    args = parser.parse_args(argv)
    with program(args.protocol, args.instances):
        Check()
        XML()


if __name__ == "__main__":
    main()
'''
