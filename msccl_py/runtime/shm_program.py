"""One rank's share of an execution plan, as the shm executor walks it, plus plan checks.

The executor runs in a Python loop, so it wants plain Python records rather
than NumPy rows (reading a slot of a record costs what unpacking a tuple
does, a NumPy scalar ten times more); :func:`rank_program` converts a rank's
rows of the :mod:`~msccl_py.plan.tables` tables once per (algorithm, rank) and
:func:`check_plan` rejects what would otherwise hang or scribble (unmatched
connections, bad dependencies, chunks outside a buffer) with an error that
names rank, threadblock and step.

>>> from msccl_py import ir
>>> tb0 = ir.Threadblock(0, send_peer=1, steps=[ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
>>> tb1 = ir.Threadblock(0, recv_peer=0, steps=[ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0))])
>>> alg = ir.Algorithm("p2p", "custom", "Simple", False, 2, 1, 1,
...                    [ir.Gpu(0, 1, 1, 0, [tb0]), ir.Gpu(1, 1, 1, 0, [tb1])])
>>> step = rank_program(alg, 1, world_size=2).tbs[0].steps[0]
>>> step.op == P.OP_RECV, step.recv, step.send
(True, True, False)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError
from msccl_py.plan import tables as P
from msccl_py.transport.shm_arena import MAX_CHANNELS


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a threadblock, with what the executor asks of it precomputed.

    Offsets and ``count`` are in chunks; buffers are ``P.BUF_*`` codes (only
    meaningful where the op reads a local source / writes a local
    destination, ``P.LOCAL_SRC``/``P.LOCAL_DST``).
    """

    op: int                             # P.OP_* code
    src_buf: int
    src_off: int
    dst_buf: int
    dst_off: int
    count: int
    deps: tuple[tuple[int, int], ...]   # (threadblock index in the rank, step) to wait for
    has_dep: bool                       # some step waits for this one: publish its flag
    recv: bool                          # takes one transfer from the receive FIFO
    send: bool                          # puts one transfer into the send FIFO
    #: the buffer a ``reduce`` accumulates from: ``dst_buf``, except in
    #: out-of-place twins (:func:`out_of_place`)
    acc_buf: int


@dataclass
class TbProgram:
    """One threadblock of a rank: its peers, its FIFOs and its steps."""

    id: int
    channel: int
    send_peer: int
    recv_peer: int
    send_conn: int          # global FIFO id (see shm_arena.Layout.conn_id) or -1
    recv_conn: int
    steps: list[Step]


@dataclass
class RankProgram:
    """The threadblocks of one rank and what a call needs to size its buffers."""

    name: str
    collective: str
    protocol: str
    nchunksperloop: int
    rank: int
    tbs: list[TbProgram]
    chunks: tuple[int, int, int]       # chunks of i, o, s a call provides (call_chunks)
    max_steps: int
    reduces: bool                      # any reduction op (avg divides the output)
    inplace_only: bool = False         # the algorithm runs only with input == output
    writes_input: bool = False         # some step stores into the input buffer
    inplace_ok: bool = False           # verified with input == output (alg.inplace)


def call_chunks(alg: ir.Algorithm, plan: P.Plan) -> np.ndarray:
    """Chunks of i, o, s per rank that a call provides (ngpus x 3).

    The plan derives them from the collective (so an in-place XML declaring
    ``o_chunks="0"`` still gets its output); gather and scatter, which the
    plan does not know, use the declared counts.
    """
    if alg.collective in ("gather", "scatter"):
        return plan.chunks
    return plan.call_chunks


def _where(plan: P.Plan, step_row: int) -> str:
    return plan.describe_step(step_row)


def check_plan(alg: ir.Algorithm, world_size: int | None = None) -> P.Plan:
    """The plan of ``alg`` after checking everything the shm runtime relies on.

    Raises :class:`~msccl_py.errors.MscclRuntimeError` naming the first
    offending rank/threadblock/step.
    """
    try:
        plan = P.plan_for(alg)
    except P.PlanError as exc:
        raise MscclRuntimeError(f"{alg.name}: {exc}") from exc
    n = alg.ngpus
    if len(alg.gpus) != n:
        raise MscclRuntimeError(f"{alg.name}: declares {n} GPUs but has {len(alg.gpus)}")
    if world_size is not None and n != world_size:
        raise MscclRuntimeError(f"{alg.name}: is a {n}-rank algorithm, the runtime has "
                                f"{world_size} ranks")
    for r, gpu in enumerate(alg.gpus):
        if gpu.rank != r:
            raise MscclRuntimeError(f"{alg.name}: GPU at position {r} has id {gpu.rank}")
    b = plan.blocks
    for row in b:
        rank, tb, chan, sp, rp = (int(v) for v in row[:P.B_SEND_CONN])
        if not 0 <= chan < MAX_CHANNELS:
            raise MscclRuntimeError(f"rank {rank} tb {tb}: channel {chan} is outside "
                                    f"0..{MAX_CHANNELS - 1}")
        for role, peer in (("send", sp), ("recv", rp)):
            if not -1 <= peer < n:
                raise MscclRuntimeError(f"rank {rank} tb {tb}: {role} peer {peer} is not a rank "
                                        f"of {n}")
    st = plan.steps
    if len(st):
        op = st[:, P.S_OP]
        bad = np.flatnonzero(P.IS_SEND[op] & (st[:, P.S_SEND_CONN] < 0))
        if len(bad):
            raise MscclRuntimeError(f"{_where(plan, bad[0])}: sends but its threadblock has "
                                    "no send peer")
        bad = np.flatnonzero(P.IS_RECV[op] & (st[:, P.S_RECV_CONN] < 0))
        if len(bad):
            raise MscclRuntimeError(f"{_where(plan, bad[0])}: receives but its threadblock has "
                                    "no receive peer")
        bad = np.flatnonzero((st[:, P.S_COUNT] < 0) | (st[:, P.S_COUNT] >= 72))
        if len(bad):
            raise MscclRuntimeError(f"{_where(plan, bad[0])}: count {st[bad[0], P.S_COUNT]} is "
                                    "outside 0..71")
        rank_of = b[st[:, P.S_BLOCK], P.B_RANK]
        for local, buf_col, off_col, what in ((P.LOCAL_SRC, P.S_SRC_BUF, P.S_SRC_OFF, "source"),
                                              (P.LOCAL_DST, P.S_DST_BUF, P.S_DST_OFF,
                                               "destination")):
            uses = local[op]
            buf = st[:, buf_col]
            bad = np.flatnonzero(uses & (buf < 0))
            if len(bad):
                raise MscclRuntimeError(f"{_where(plan, bad[0])}: has no local {what} buffer")
            limit = np.maximum(plan.chunks, call_chunks(alg, plan))[rank_of, np.clip(buf, 0, 2)]
            off = st[:, off_col]
            bad = np.flatnonzero(uses & ((off < 0) | (off + st[:, P.S_COUNT] > limit)))
            if len(bad):
                s = bad[0]
                raise MscclRuntimeError(
                    f"{_where(plan, s)}: {what} chunks {off[s]}..{off[s] + st[s, P.S_COUNT] - 1} "
                    f"of buffer {P.BUF_NAMES[buf[s]]} are outside its {limit[s]} chunks")
    if len(plan.deps):
        bad = np.flatnonzero(plan.deps[:, P.D_STEP] < 0)
        if len(bad):
            row = int(np.searchsorted(st[:, P.S_DEP_BEGIN] + st[:, P.S_NDEPS], bad[0],
                                      side="right"))
            d = plan.deps[bad[0]]
            raise MscclRuntimeError(f"{_where(plan, row)}: depends on a step that does not "
                                    f"exist (threadblock block {d[P.D_BLOCK]}, step "
                                    f"{d[P.D_INDEX]})")
    for c in plan.conns:
        chan, snd, rcv, sb, rb, ns, nr = (int(v) for v in c)
        if sb < 0 or rb < 0:
            who = (f"rank {snd} has no threadblock sending to rank {rcv}" if sb < 0 else
                   f"rank {rcv} has no threadblock receiving from rank {snd}")
            raise MscclRuntimeError(f"connection channel {chan} rank {snd} -> rank {rcv}: {who}")
        if ns != nr:
            raise MscclRuntimeError(f"connection channel {chan} rank {snd} -> rank {rcv}: "
                                    f"{ns} sends per iteration but {nr} receives")
    if len(st):
        sends = np.flatnonzero(st[:, P.S_SEND_PEER_STEP] >= 0)
        peer = st[sends, P.S_SEND_PEER_STEP]
        bad = np.flatnonzero(st[sends, P.S_COUNT] != st[peer, P.S_COUNT])
        if len(bad):
            s, q = sends[bad[0]], peer[bad[0]]
            raise MscclRuntimeError(f"{_where(plan, s)} sends {st[s, P.S_COUNT]} chunks but the "
                                    f"matching {_where(plan, q)} receives {st[q, P.S_COUNT]}")
    return plan


def rank_program(alg: ir.Algorithm, rank: int, world_size: int) -> RankProgram:
    """Rank ``rank``'s threadblocks of ``alg`` (after :func:`check_plan`)."""
    plan = check_plan(alg, world_size)
    first, last = int(plan.rank_blocks[rank]), int(plan.rank_blocks[rank + 1])
    tbs = []
    max_steps = 1
    reduces = writes_input = False
    for blk in range(first, last):
        row = plan.blocks[blk]
        chan, sp, rp = int(row[P.B_CHAN]), int(row[P.B_SEND_PEER]), int(row[P.B_RECV_PEER])
        steps = []
        for s in plan.block_steps(blk):
            deps = tuple((int(d[P.D_BLOCK]) - first, int(d[P.D_INDEX]))
                         for d in plan.deps[s[P.S_DEP_BEGIN]:s[P.S_DEP_BEGIN] + s[P.S_NDEPS]])
            op = int(s[P.S_OP])
            reduces |= bool(P.IS_REDUCE[op])
            writes_input |= bool(P.LOCAL_DST[op]) and int(s[P.S_DST_BUF]) == P.BUF_I
            steps.append(Step(op, int(s[P.S_SRC_BUF]), int(s[P.S_SRC_OFF]), int(s[P.S_DST_BUF]),
                              int(s[P.S_DST_OFF]), int(s[P.S_COUNT]), deps, bool(s[P.S_HAS_DEP]),
                              bool(P.IS_RECV[op]), bool(P.IS_SEND[op]), int(s[P.S_DST_BUF])))
        max_steps = max(max_steps, len(steps) + 1)
        tbs.append(TbProgram(int(row[P.B_TB]), chan, sp, rp,
                             (chan * world_size + rank) * world_size + sp if sp >= 0 else -1,
                             (chan * world_size + rp) * world_size + rank if rp >= 0 else -1,
                             steps))
    chunks = tuple(int(c) for c in call_chunks(alg, plan)[rank])
    return RankProgram(alg.name, alg.collective, alg.protocol, alg.nchunksperloop, rank, tbs,
                       chunks, max_steps,
                       reduces, alg.inplace and not alg.outofplace, writes_input,
                       bool(alg.inplace))


def out_of_place(prog: RankProgram) -> tuple[RankProgram, list[int]] | None:
    """An out-of-place twin of an in-place-only program, or None when there is none.

    In place, input and output are one buffer. The twin writes to the output
    and reads each chunk from the output if some step ordered before the read
    (program order and dependencies) wrote it, else from the untouched input,
    so a caller with separate buffers saves copying the input first. Returns
    the twin and the chunks it never writes (the caller copies those from the
    input afterwards); a ``reduce`` into a chunk nobody wrote before it
    accumulates from the input into the output. None when one step's chunks
    mix written and unwritten ones.

    >>> from msccl_py.runtime import shm_fallback
    >>> alg = shm_fallback.allreduce_ring(2)
    >>> alg.outofplace = False
    >>> twin, untouched = out_of_place(rank_program(alg, 0, 2))
    >>> [s.src_buf for s in twin.tbs[0].steps], untouched     # input, input, -
    ([0, 0, 1], [])
    """
    i_ch, o_ch = prog.chunks[0], prog.chunks[1]
    if not prog.inplace_only or i_ch != o_ch:
        return None
    nodes = [(t, s) for t, tb in enumerate(prog.tbs) for s in range(len(tb.steps))]
    index = {node: i for i, node in enumerate(nodes)}
    before: dict[int, int] = {}            # node -> bitset of nodes ordered before it

    def ancestors(node: int, visiting: set) -> int:
        got = before.get(node)
        if got is not None:
            return got
        if node in visiting:
            raise ValueError("dependency cycle")
        visiting.add(node)
        t, s = nodes[node]
        preds = [index[(t, s - 1)]] if s else []
        preds += [index[d] for d in prog.tbs[t].steps[s].deps if d in index]
        acc = 0
        for p in preds:
            acc |= (1 << p) | ancestors(p, visiting)
        visiting.discard(node)
        before[node] = acc
        return acc

    shared = (P.BUF_I, P.BUF_O)
    writes = [0] * i_ch
    for node, (t, s) in enumerate(nodes):
        step = prog.tbs[t].steps[s]
        if P.LOCAL_DST[step.op] and step.dst_buf in shared:
            for k in range(step.dst_off, step.dst_off + step.count):
                writes[k] |= 1 << node
    try:
        for node in range(len(nodes)):
            ancestors(node, set())
    except (ValueError, RecursionError):
        return None

    def written(node: int, off: int, c: int) -> bool | None:
        flags = {bool(before[node] & writes[k]) for k in range(off, off + c)}
        return flags.pop() if len(flags) == 1 else (None if flags else False)

    tbs = []
    for t, tb in enumerate(prog.tbs):
        steps = []
        for s, step in enumerate(tb.steps):
            op, sb, db, acc, c = step.op, step.src_buf, step.dst_buf, step.acc_buf, step.count
            node = index[(t, s)]
            if P.LOCAL_SRC[op] and sb in shared:
                w = written(node, step.src_off, c)
                if w is None:
                    return None
                sb = P.BUF_O if w else P.BUF_I
            if P.LOCAL_DST[op] and db in shared:
                if op == P.OP_REDUCE:
                    w = written(node, step.dst_off, c)
                    if w is None:
                        return None
                    acc = P.BUF_O if w else P.BUF_I
                db = P.BUF_O
            steps.append(replace(step, src_buf=sb, dst_buf=db, acc_buf=acc))
        tbs.append(TbProgram(tb.id, tb.channel, tb.send_peer, tb.recv_peer, tb.send_conn,
                             tb.recv_conn, steps))
    twin = RankProgram(prog.name, prog.collective, prog.protocol, prog.nchunksperloop,
                       prog.rank, tbs, prog.chunks, prog.max_steps, prog.reduces,
                       inplace_only=False, writes_input=False)
    return twin, [k for k in range(i_ch) if not writes[k]]
