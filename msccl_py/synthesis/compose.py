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
machine's links finish one block after them (a few blocks, ``first`` and
``last``, where the target's steps per threadblock force fewer steps). A ring
of ``K`` takes ``2 (K - 1)`` steps per rank; where that is more than the target allows one
threadblock, the ring's blocks alternate over several channels
(``ring_channels``), each a threadblock with its share of the steps, all
streaming at once (a block keeps its channel around the ring). Otherwise,
since one threadblock is slower than a NIC, two rings run in opposite
directions (*halves*: two connections per NIC, each half the data).

The program is written compactly (the machine's trees, the rail's ring order
and the parameters; a short walker builds the steps): its text grows only by
the ring's list of machines, and the lowered program is linear in ranks.

>>> from msccl_py.topologies import load
>>> plan = composed_plan(load("dgx-h100", nodes=4), 258.1)
>>> plan.halves, plan.ring_channels, plan.chunks
(2, 1, 64)
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

from msccl_py.errors import MscclError

#: a lane runs at most this share of the threadblock limit (as ``schedule.LANE_HEADROOM``)
HEADROOM = 0.9
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
    first: int = 1                 # blocks in the machine's first step
    last: int = 1                  # blocks in its last (the copy-out's steps, reversed)

    @property
    def chunks(self) -> int:
        """Chunks in each rank's buffer: G shards x halves x K blocks."""
        return self.gpus * self.halves * self.nodes

    @property
    def ranks(self) -> int:
        return self.gpus * self.nodes


def composed_plan(topo, algbw: float, max_steps: int = 64, hop_table=None) -> ComposedPlan:
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
    ring_channels = 1
    while 2 * math.ceil(nodes / ring_channels) > max_steps:
        ring_channels += 1
    halves = 2 if ring_channels == 1 else 1
    tb = (local.threadblock_bw or math.inf) * HEADROOM
    # while the ring reduces, each machine connection into an owner feeds what the owner's
    # NIC sends: one block per ring step (per half)
    nic = algbw * 2 * (nodes - 1) / nodes / per   # GB/s each NIC carries at the bound
    intra = max(1, math.ceil(nic / halves / tb)) if math.isfinite(tb) else 1
    # where the machine's steps do not fit a threadblock, its first and last steps take
    # more blocks (the ring starts later and the copy-out ends later, once each) rather
    # than its steps growing faster (the machine, barely faster than the NICs under its
    # NVLink budget, would then stall the ring again and again); the copy-out's first,
    # as its runs wait on several ring threadblocks (no-ops)
    first = last = 1
    while _intra_steps(nodes, halves, intra, GROW, first, last, ring_channels, local_in,
                       local_out) > max_steps and first < nodes:
        if last <= first:
            last += 1
        else:
            first += 1
    return ComposedPlan(per, nodes, tuple(range(nodes)), local_in, local_out, halves,
                        ring_channels, intra, GROW, first, last)


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


def groups(blocks, grow, first=1):
    """Block counts of the machine's steps in the ring's order: ``first`` blocks at first
    (the ring starts after them), then ``first`` + grow x the blocks before, so the
    machine, faster than the ring by about that share, keeps ahead of it with few steps."""
    out, left = [], blocks
    while left:
        out.append(min(left, first + int(grow * (blocks - left))))
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


def need(pos, h, nodes):
    """Blocks in the order half h's ring reduces them at position pos."""
    d = 1 - 2 * h
    return [(pos - d * (t + 1)) % nodes for t in range(nodes)]


def done(pos, h, nodes):
    """Blocks in the order half h's ring finishes them at position pos."""
    d = 1 - 2 * h
    return [(pos - d * t) % nodes for t in range(nodes)]


def _intra_steps(nodes: int, halves: int, channels: int, grow: float, first: int, last: int,
                 ring_channels: int, local_in, local_out) -> int:
    """Most steps a machine threadblock takes: per channel, the runs it moves times the
    sends one rank makes to one peer (or receives from one) per run; a run copied out
    after the ring waits on the last ring step of each ring threadblock that finished one
    of its blocks (one step each: an XML step names one dependency, the compiler adds
    no-ops for the rest)."""
    sends: dict = {}
    for table, kind in ((local_in, 0), (local_out, 1)):
        for hops in table:
            for a, b in hops:
                sends[a, b, kind] = sends.get((a, b, kind), 0) + 1
    per_run = [max((n for (_, _, k), n in sends.items() if k == kind), default=0)
               for kind in (0, 1)]
    sizes = groups(nodes, grow, first)
    out_sizes = groups(nodes, grow, last)[::-1]
    most = 0
    for h in range(halves):
        for pos in range(nodes):
            count = [0] * channels
            for kind, order, sz in ((0, need(pos, h, nodes), sizes),
                                    (1, done(pos, h, nodes), out_sizes)):
                for g, _, m in runs(order, sz):
                    count[g % channels] += per_run[kind] * (min(m, ring_channels) if kind
                                                            else 1)
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

        def ring_ch(h, b):
            return h * RING_CHANNELS + b % RING_CHANNELS

        def local_ch(h, g):
            return H * RING_CHANNELS + h * INTRA_CHANNELS + g % INTRA_CHANNELS

        # 1. each machine reduces every shard onto its owner, blocks as the ring needs them
        for h in range(H):
            for pos in range(K):
                for g, b, m in runs(need(pos, h, K), groups(K, GROW, FIRST)):
                    for s in range(G):
                        for a, c in LOCAL_IN[s]:
                            chunk(rank(pos, c), Buffer.input, index(s, h, b), m).reduce(
                                chunk(rank(pos, a), Buffer.input, index(s, h, b), m),
                                ch=local_ch(h, g))
        # 2. each rail's owners allreduce their shard around the ring of machines
        for h in range(H):
            d = 1 - 2 * h
            for t in range(K - 1):          # reduce-scatter
                for pos in range(K):
                    b = (pos - d * (t + 1)) % K
                    for s in range(G):
                        chunk(rank((pos + d) % K, s), Buffer.input, index(s, h, b)).reduce(
                            chunk(rank(pos, s), Buffer.input, index(s, h, b)), ch=ring_ch(h, b))
            for t in range(K - 1):          # allgather
                for pos in range(K):
                    b = (pos - d * t) % K
                    for s in range(G):
                        chunk(rank(pos, s), Buffer.input, index(s, h, b)).copy(
                            rank((pos + d) % K, s), Buffer.input, index(s, h, b),
                            ch=ring_ch(h, b))
        # 3. each machine copies every owner's results out, blocks as the ring finishes them
        for h in range(H):
            for pos in range(K):
                for g, b, m in runs(done(pos, h, K), groups(K, GROW, LAST)[::-1]):
                    for s in range(G):
                        for a, c in LOCAL_OUT[s]:
                            chunk(rank(pos, a), Buffer.input, index(s, h, b), m).copy(
                                rank(pos, c), Buffer.input, index(s, h, b), ch=local_ch(h, g))
    return prog
'''


#: the helpers the program's walker shares with this module (the same text)
HELPERS = "\n\n" + "\n\n".join(inspect.getsource(f) for f in (groups, runs, need, done))


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
RING_CHANNELS = {plan.ring_channels}  # channels a ring's blocks alternate over
INTRA_CHANNELS = {plan.intra_channels}  # channels a machine's steps alternate over, per half
GROW = {plan.grow}  # a machine step moves FIRST + GROW x the blocks before it
FIRST = {plan.first}  # blocks in the machine's first step
LAST = {plan.last}  # blocks in its last step (the copy-out's steps grow toward the start)
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
