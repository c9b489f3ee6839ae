"""The fast path: time one representative per class of ranks that a symmetry makes alike.

A rank relabelling σ (node shift ``r -> r + d·G mod n``, GPU rotation inside
every node, or xor of the GPU or node index with a power of two, see
:func:`candidates`) is a *timing symmetry* of a plan on a machine when it maps the
plan's timing graph onto itself: every threadblock of rank r has one of
rank σ(r) on the same channel whose peers are the images of its peers, with
the same steps (operation, chunk count), each send matched to the image of
its receive, each dependency to the image of its dependency; and every
connection's timing inputs (α, shared rate, rate alone on its path, as
:func:`~msccl_py.simulate.engine.wiring` computes them over the whole machine)
equal those of its image. Chunk offsets are not compared: the engine never
reads them. The check is a few vectorised passes over the plan's tables, so
it costs O(steps), and it proves, rather than assumes, that the max-plus pass
gives a step and its image the same start and end.

Given verified symmetries, every rank's steps are timed as those of its
class's representative (the smallest rank of its orbit under them): the
*quotient* plan keeps the representatives' threadblocks only, and a step
that waits for another rank's step waits for that step's image on a
representative, which ends at the same time. The quotient is acyclic (a
cycle there would unfold into one in the plan), so the engine runs it as it
is, with each connection's rate taken from the whole machine's wiring, and
finds the same times, bottleneck and hop chain as the full plan; the cost
falls from all ranks' steps to the representatives'. Resources are shared among
the connections busy at once (:mod:`~msccl_py.simulate.sharing`), so the quotient
keeps every rank's sends, as rows of their representatives' images, for the
engine to tell who is busy when. Where no candidate
holds (an irregular program, a machine whose links differ between ranks) the
plan is timed whole.

>>> from msccl_py import library
>>> from msccl_py.plan.tables import plan_for
>>> from msccl_py.simulate.machine import machine_model
>>> from msccl_py.topologies import load
>>> alg = library.compile("allreduce_ring", 16, use_cache=False)
>>> q = quotient(plan_for(alg), machine_model(load("dgx-h100", nodes=2)), "Simple")
>>> q.classes, q.symmetries, q.plan.nsteps * 2 == plan_for(alg).nsteps
(8, ('node shift by 1',), True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.plan.tables import (
    B_CHAN,
    B_NSTEPS,
    B_RANK,
    B_RECV_PEER,
    B_SEND_PEER,
    B_STEP_BEGIN,
    D_BLOCK,
    D_STEP,
    IS_SEND,
    S_BLOCK,
    S_COUNT,
    S_DEP_BEGIN,
    S_INDEX,
    S_NDEPS,
    S_OP,
    S_RECV_PEER_STEP,
    S_RECV_SEQ,
    S_SEND_CONN,
    S_SEND_PEER_STEP,
    S_SEND_SEQ,
    Plan,
)
from msccl_py.simulate.engine import CACHE, Wiring, wiring
from msccl_py.simulate.machine import Machine

#: relative difference below which two connections' rates (α) count as equal: the
#: whole-machine shares are sums taken in different orders
RATE_TOL = 1e-9


@dataclass(frozen=True)
class Quotient:
    """A plan cut down to one representative rank per class (see the module docstring)."""

    plan: Plan                        # the representatives' steps, for the engine
    classes: int                      # representative ranks timed
    ranks: int                        # ranks of the whole plan
    symmetries: tuple[str, ...]       # the relabellings verified, e.g. "node shift by 1"


def quotient(plan: Plan, machine: Machine, protocol: str) -> Quotient | None:
    """The :class:`Quotient` of ``plan`` on ``machine`` under the symmetries that hold, or
    None when none does (then the plan is timed whole). Kept in the engine's cache."""
    return CACHE.get(plan, ("quotient", machine.key, protocol),
                     lambda: _quotient(plan, machine, protocol))


def _quotient(plan: Plan, machine: Machine, protocol: str) -> Quotient | None:
    if plan.ngpus < 2 or plan.ngpus != machine.ngpus or not plan.nsteps:
        return None
    w = CACHE.get(plan, ("wiring", machine.key, protocol),
                  lambda: wiring(plan, machine, protocol))
    found: list[tuple[str, np.ndarray, np.ndarray]] = []
    for level in candidates(plan.ngpus, machine):
        shift = 0
        for name, perm in level:
            step = int(name.rsplit(" ", 1)[1]) if name[-1].isdigit() else 0
            if shift and step % shift == 0:
                continue       # a shift by ``shift`` nodes holds, which moves nodes so too
            bmap = block_map(plan, perm, w)
            if bmap is None:
                continue
            found.append((name, perm, bmap))
            if name in ("GPU rotation", "node shift by 1"):
                break          # one orbit already holds every GPU of a node (every node)
            if name.startswith("node shift"):
                shift = step
    if not found:
        return None
    rep_block, reps = _orbits(plan, [(p, b) for _, p, b in found])
    qplan = _cut(plan, rep_block, reps)
    CACHE.get(qplan, ("wiring", machine.key, protocol), lambda: w)
    return Quotient(qplan, len(reps), plan.ngpus, tuple(n for n, _, _ in found))


def candidates(n: int, machine: Machine) -> list[list[tuple[str, np.ndarray]]]:
    """Rank relabellings worth checking, per level (GPUs inside a node, then nodes): GPU
    rotation inside every node, else GPU xor 2^k (recursive doubling's pairs); node
    shifts by 1 node, by a fabric's leaf group and by its pod (the fabric's routes repeat
    there), else node xor 2^k. Each relabels every node (every GPU) at once."""
    topo = machine.topology
    per = getattr(topo, "gpus_per_node", None) or n
    nodes = getattr(topo, "num_machines", 1) or 1
    if per * nodes != n:
        per, nodes = n, 1
    r = np.arange(n, dtype=np.int64)
    gpu, node = r % per, r // per
    inner = []
    if per > 1:
        inner.append(("GPU rotation", node * per + (gpu + 1) % per))
    inner += [(f"GPU xor {b}", node * per + (gpu ^ b)) for b in _bits(per)]
    shifts = [1]
    from msccl_py.topologies.fabric import of
    fab = of(topo) if nodes > 1 else None
    if fab is not None and fab.spec.kind != "flat":
        shifts.append(fab.group)
        if fab.spec.pod:
            shifts.append(fab.group * fab.spec.pod)
    outer = [(f"node shift by {d}", (r + d * per) % n) for d in dict.fromkeys(shifts)
             if 0 < d < nodes]
    outer += [(f"node xor {b}", (node ^ b) * per + gpu) for b in _bits(nodes)]
    return [level for level in (inner, outer) if level]


def _bits(count: int) -> list[int]:
    """1, 2, 4, ... below ``count`` when it is a power of two (xor stays inside), else none."""
    if count < 2 or count & (count - 1):
        return []
    return [1 << k for k in range(count.bit_length() - 1)]


def block_map(plan: Plan, perm: np.ndarray, w: Wiring) -> np.ndarray | None:
    """Per block, its image under the rank relabelling ``perm`` when ``perm`` is a timing
    symmetry of ``plan`` with wiring ``w`` (module docstring), else None.

    A block's image is the block of the image rank with the image peers on the same
    channel; failing that, with the image peers on any channel, in order (a program may
    number its channels from each rank's own position: the engine reads channels only
    through the connections' rates, which are compared)."""
    for by_channel in (True, False):
        bmap = _matched(plan, perm, by_channel)
        if bmap is not None and _same_timing(plan, bmap, w):
            return bmap
    return None


def _matched(plan: Plan, perm: np.ndarray, by_channel: bool) -> np.ndarray | None:
    """Per block, the block of rank ``perm[rank]`` with the image peers (and channel)."""
    blocks = plan.blocks
    n = plan.ngpus
    rank = blocks[:, B_RANK]
    chan = blocks[:, B_CHAN] if by_channel else np.zeros(len(blocks), dtype=np.int64)
    sp, rp = blocks[:, B_SEND_PEER], blocks[:, B_RECV_PEER]
    if sp.max(initial=-1) >= n or rp.max(initial=-1) >= n or chan.min(initial=0) < 0:
        return None
    ext = np.append(perm, -1)          # ext[-1] = -1: no peer stays no peer
    nch = int(chan.max(initial=0)) + 1
    if n * nch * (n + 1) ** 2 * max(1, len(blocks)) >= 1 << 62:
        return None
    key = ((rank * nch + chan) * (n + 1) + sp + 1) * (n + 1) + rp + 1
    img = ((perm[rank] * nch + chan) * (n + 1) + ext[sp] + 1) * (n + 1) + ext[rp] + 1
    # blocks of one key (several peerless ones) pair up in order
    order = np.argsort(key, kind="stable")
    sk = key[order]
    first = np.searchsorted(sk, sk, side="left")
    ordinal = np.empty(len(key), dtype=np.int64)
    ordinal[order] = np.arange(len(key)) - first
    span = int(ordinal.max(initial=0)) + 1
    full, full_img = key * span + ordinal, img * span + ordinal
    order = np.argsort(full)
    pos = np.minimum(np.searchsorted(full[order], full_img), len(key) - 1)
    bmap = order[pos]
    return bmap if np.array_equal(full[bmap], full_img) else None


def _same_timing(plan: Plan, bmap: np.ndarray, w: Wiring) -> bool:
    """Whether the block map ``bmap`` maps the timing graph and the connections' timing
    inputs onto themselves (module docstring)."""
    blocks, steps = plan.blocks, plan.steps
    if not np.array_equal(blocks[bmap, B_NSTEPS], blocks[:, B_NSTEPS]):
        return False
    smap = blocks[bmap[steps[:, S_BLOCK]], B_STEP_BEGIN] + steps[:, S_INDEX]
    for col in (S_OP, S_COUNT, S_NDEPS, S_SEND_SEQ, S_RECV_SEQ):
        if not np.array_equal(steps[smap, col], steps[:, col]):
            return False
    smap_ext = np.append(smap, -1)
    for col in (S_RECV_PEER_STEP, S_SEND_PEER_STEP):
        if not np.array_equal(steps[smap, col], smap_ext[steps[:, col]]):
            return False
    if not _same_deps(plan, smap):
        return False
    sends = np.flatnonzero(steps[:, S_SEND_CONN] >= 0)
    c, ci = steps[sends, S_SEND_CONN], steps[smap[sends], S_SEND_CONN]
    if (ci < 0).any():
        return False
    for a in (w.rate, w.peak, w.alpha):
        if not np.allclose(a[ci], a[c], rtol=RATE_TOL, atol=0.0):
            return False
    return True


def _same_deps(plan: Plan, smap: np.ndarray) -> bool:
    """Whether the dependency edges, relabelled by ``smap``, are the same edges."""
    nd = plan.steps[:, S_NDEPS]
    if not len(plan.deps):
        return True
    owner = np.repeat(np.arange(plan.nsteps, dtype=np.int64), nd)
    src = plan.deps[:, D_STEP]
    ok = src >= 0
    owner, src = owner[ok], src[ok]
    n = plan.nsteps
    return np.array_equal(np.sort(owner * n + src), np.sort(smap[owner] * n + smap[src]))


def _orbits(plan: Plan, gens: list[tuple[np.ndarray, np.ndarray]]):
    """(per block: the block of its class's representative it is an image of, the
    representative ranks): each rank is reached from the smallest rank of its orbit by a
    product of the verified symmetries, and its blocks by the same product."""
    n = plan.ngpus
    rb = plan.rank_blocks
    rep_block = np.full(plan.nblocks, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    reps = []
    for r0 in range(n):
        if seen[r0]:
            continue
        seen[r0] = True
        reps.append(r0)
        rep_block[rb[r0]:rb[r0 + 1]] = np.arange(rb[r0], rb[r0 + 1])
        stack = [r0]
        while stack:
            r = stack.pop()
            own = np.arange(rb[r], rb[r + 1])
            for perm, bmap in gens:
                s = int(perm[r])
                if not seen[s]:
                    seen[s] = True
                    rep_block[bmap[own]] = rep_block[own]
                    stack.append(s)
    return rep_block, reps


def _cut(plan: Plan, rep_block: np.ndarray, reps: list[int]) -> Plan:
    """The representatives' plan: their blocks and steps, every reference to a step or
    block of another rank replaced by its representative's; connections stay the whole
    plan's (their rates come from the whole machine)."""
    blocks, steps, deps = plan.blocks, plan.steps, plan.deps
    rb = plan.rank_blocks
    keep = np.concatenate([np.arange(rb[r], rb[r + 1]) for r in reps])
    qb = np.full(plan.nblocks + 1, -1, dtype=np.int64)
    qb[keep] = np.arange(len(keep))
    nst = blocks[keep, B_NSTEPS]
    begin = blocks[keep, B_STEP_BEGIN]
    rows = np.repeat(begin - np.cumsum(nst) + nst, nst) + np.arange(int(nst.sum()))
    qs = np.full(plan.nsteps + 1, -1, dtype=np.int64)   # kept step -> its quotient row
    qs[rows] = np.arange(len(rows))
    # any step -> the quotient row of its representative's image
    rep_step = blocks[rep_block[steps[:, S_BLOCK]], B_STEP_BEGIN] + steps[:, S_INDEX]
    of_step = np.append(qs[rep_step], -1)
    of_block = np.append(qb[rep_block], -1)
    new_steps = steps[rows].copy()
    new_steps[:, S_BLOCK] = qb[new_steps[:, S_BLOCK]]
    for col in (S_SEND_PEER_STEP, S_RECV_PEER_STEP):
        new_steps[:, col] = of_step[new_steps[:, col]]
    nd = new_steps[:, S_NDEPS]
    new_steps[:, S_DEP_BEGIN] = np.cumsum(nd) - nd
    drows = np.repeat(steps[rows, S_DEP_BEGIN] - np.cumsum(nd) + nd, nd) + \
        np.arange(int(nd.sum()))
    new_deps = deps[drows].copy()
    if len(new_deps):
        new_deps[:, D_STEP] = of_step[new_deps[:, D_STEP]]
        new_deps[:, D_BLOCK] = of_block[new_deps[:, D_BLOCK]]
    new_blocks = blocks[keep].copy()
    new_blocks[:, B_STEP_BEGIN] = np.cumsum(nst) - nst
    counts = np.zeros(plan.ngpus, dtype=np.int64)
    counts[reps] = rb[np.array(reps) + 1] - rb[np.array(reps)]
    rank_blocks = np.concatenate([[0], np.cumsum(counts)])
    qplan = Plan(plan.collective, plan.protocol, plan.ngpus, plan.nchunksperloop, new_blocks,
                 new_steps, new_deps, plan.conns, rank_blocks, plan.chunks, plan.call_chunks)
    # every send of the whole plan, as its representative's image: the engine shares a
    # resource among the connections busy at once, those of every rank
    sends = np.nonzero(IS_SEND[steps[:, S_OP]] & (steps[:, S_SEND_CONN] >= 0))[0]
    CACHE.get(qplan, ("whole sends",), lambda: (steps[sends, S_SEND_CONN], of_step[sends]))
    return qplan
