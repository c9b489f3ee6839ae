"""The instruction DAG: per-slot read/write hazards and send↔recv pairs.

Each operation becomes one local instruction (``copy``/``reduce``) or a
``send`` on the source rank matched with a ``recv``/``recv_reduce_copy`` on
the destination rank. Hazard edges (RAW, WAR, WAW) are per chunk slot and
always join instructions of one rank; ranks meet only through matches.
Edges run from lower to higher ``seq`` (program order), which later passes
rely on.

Slots are physical: named scratch buffers are placed in the one ``s``
buffer first (``scratch.layout``), and ``src``/``dst`` are interned
:class:`~msccl_py.ir.Loc` objects, so identity is equality.

Each instruction also gets a ``level``: the communication round it could
run in, one more than the latest transfer it depends on. The scheduler
prefers low levels, so a program written chunk by chunk still runs round by
round (a ring allgather moves every rank's chunk in the first round).

The builder is one loop with its helpers inlined: it runs once per
operation of programs with hundreds of thousands of them.
"""

from __future__ import annotations

from msccl_py import ir
from msccl_py.compiler.trace import Op


class Instr:
    """One instruction on one rank. ``src``/``dst`` are :class:`~msccl_py.ir.Loc` on this rank;
    ``seq`` is the index of the trace operation behind it, ``match`` the other end of a
    transfer (-1: a local operation), ``level`` its round (see above).

    ``absorbed`` is the send a fused receive took over (-1: none; ``Dag.carrier`` maps
    the send back); ``tb``/``step`` its threadblock and position there, once placed.

    Only :func:`_build` makes instructions: ``Instr()`` (the class has no ``__init__``),
    then every slot set inline, as an ``__init__`` call per instruction costs more (a
    program has hundreds of thousands); ``tests/compiler`` checks that no slot is left unset.
    """

    __slots__ = ("id", "rank", "op", "src", "dst", "count", "seq", "ch", "inst", "preds",
                 "sp", "rp", "sendtb", "recvtb", "match", "level", "tb", "step", "absorbed")


_NO_PREDS: tuple = ()  # shared by the many instructions without predecessors


class Dag:
    """Instructions of a program, with per-instruction predecessor lists (no repeats).

    ``sizes[rank]`` is ``{"i": chunks, "o": chunks, "s": chunks}`` and
    ``offsets[rank]`` maps a scratch key ``("s", name)`` to its first chunk
    in ``s``. Per instruction id, for ``fusion``: ``reader`` is the latest
    instruction to read what it wrote, ``nreaders`` how many distinct ones did
    and ``overwritten`` how many of its slots a later write replaced; for
    ``schedule``: ``prio``, its priority (round, then operation, then id) packed
    in one int as ``(level * (len(ops) + 1) + seq) * scale + id``.
    """

    def __init__(self, ops: list[Op], sizes: list[dict], offsets: list[dict] | None = None):
        self.ops = ops
        self.instrs: list[Instr] = []
        self.carrier: list[int] = []  # the live instruction carrying each id (``fusion``)
        self.reader: list[int] = []
        self.nreaders: list[int] = []
        self.overwritten: list[int] = []
        self.prio: list[int] = []
        self.scale = 1
        _build(self, ops, sizes, offsets or [{} for _ in sizes])


def _build(dag: Dag, ops: list[Op], sizes: list[dict], offsets: list[dict]) -> None:
    instrs = dag.instrs
    new = instrs.append
    # interned Locs by buffer and offset (identity is equality for later passes)
    locs = {b: [None] * max([sz.get(b, 0) for sz in sizes] + [0]) for b in ("i", "o", "s")}
    # per rank and physical buffer: (last writer of each slot, readers since that write,
    # the buffer's Locs); readers are None, one id, or a list of two or more (most slots
    # are read once between writes)
    slots = [{b: ([-1] * n, [None] * n, locs[b]) for b, n in s.items()} for s in sizes]
    top = 2 * len(ops)  # at most two instructions per operation; trimmed at the end
    # mark[i] == me: i is me or already in me's preds (read only for multi-chunk operations)
    mark = [-1] * top
    reader, nreaders, overwritten = [-1] * top, [0] * top, [0] * top
    # the first round a successor of each instruction can run in: transfers take a round
    after = [0] * top
    prio = [0] * top
    span = len(ops) + 1
    Loc = ir.Loc

    def access(me, preds, rank, buf, start, count, write):
        """Record ``me`` reading or writing ``count`` slots; extend ``preds``."""
        W, R, _ = slots[rank][buf]
        for j in range(start, start + count):
            w = W[j]
            if w >= 0 and mark[w] != me:
                mark[w] = me
                preds.append(w)
            if write:
                if w >= 0:
                    overwritten[w] += 1
                rs = R[j]
                if rs is not None:
                    for q in (rs,) if rs.__class__ is int else rs:
                        if mark[q] != me:
                            mark[q] = me
                            preds.append(q)
                    R[j] = None
                W[j] = me
            else:
                if w >= 0 and reader[w] != me:
                    reader[w] = me
                    nreaders[w] += 1
                rs = R[j]
                if rs is None:
                    R[j] = me
                elif rs.__class__ is int:
                    if rs != me:
                        R[j] = [rs, me]
                elif rs[-1] != me:
                    rs.append(me)

    for k, o in enumerate(ops):
        sr, dr, c = o.src_rank, o.dst_rank, o.size
        sb, si = o.src_buf, o.src_idx  # pairs: a longer unpacking would build a tuple
        db, di = o.dst_buf, o.dst_idx
        if sb != "i" and sb != "o":
            si += offsets[sr][sb]
            sb = "s"
        if db != "i" and db != "o":
            di += offsets[dr][db]
            db = "s"
        sW, sR, row = slots[sr][sb]
        src = row[si]
        if src is None:
            src = row[si] = Loc(sb, si)
        dW, dR, row = slots[dr][db]
        dst = row[di]
        if dst is None:
            dst = row[di] = Loc(db, di)
        reduce = o.kind == "reduce"
        me = len(instrs)
        if sr == dr:
            mark[me] = me  # never its own predecessor
            preds: list[int] = []
            access(me, preds, sr, sb, si, c, False)
            if reduce:
                access(me, preds, sr, db, di, c, False)
            access(me, preds, sr, db, di, c, True)
            level = after[me] = max(map(after.__getitem__, preds)) if preds else 0
            prio[me] = (level * span + k) * top + me
            ins = Instr()
            ins.id, ins.rank, ins.op = me, sr, "reduce" if reduce else "copy"
            ins.src, ins.dst, ins.count, ins.seq, ins.ch, ins.inst = src, dst, c, k, o.ch, o.inst
            ins.preds, ins.sp, ins.rp = preds, -1, -1
            ins.sendtb, ins.recvtb = o.sendtb if o.sendtb >= 0 else o.recvtb, -1
            ins.match, ins.level, ins.tb, ins.step, ins.absorbed = -1, level, None, -1, -1
            new(ins)
            continue
        rme = me + 1
        if c == 1:
            # one slot each side (nearly every operation): the hazards of ``access``
            # without its bookkeeping, as no predecessor can repeat
            w = sW[si]
            if w >= 0:
                spreds = (w,)
                reader[w] = me
                nreaders[w] += 1
                level = after[w]
            else:
                spreds = _NO_PREDS
                level = 0
            rs = sR[si]
            if rs is None:
                sR[si] = me
            elif rs.__class__ is int:
                sR[si] = [rs, me]
            else:
                rs.append(me)
            w = dW[di]
            rs = dR[di]
            if rs is None:
                rpreds = (w,) if w >= 0 else _NO_PREDS
            else:
                dR[di] = None
                if rs.__class__ is int:
                    rpreds = (w, rs) if w >= 0 else (rs,)
                    f = after[rs]
                else:
                    # the slot's reader list is dropped: take it over
                    rpreds = [w, *rs] if w >= 0 else rs
                    f = max(map(after.__getitem__, rs))
                if f > level:
                    level = f
            if w >= 0:
                overwritten[w] += 1
                if reduce:
                    reader[w] = rme
                    nreaders[w] += 1
                f = after[w]
                if f > level:
                    level = f
            dW[di] = rme
        else:
            mark[me] = me
            mark[rme] = rme
            spreds, rpreds = [], []
            access(me, spreds, sr, sb, si, c, False)
            if reduce:
                access(rme, rpreds, dr, db, di, c, False)
            access(rme, rpreds, dr, db, di, c, True)
            level = max(map(after.__getitem__, spreds)) if spreds else 0
            if rpreds:
                lr = max(map(after.__getitem__, rpreds))
                if lr > level:
                    level = lr
        after[me] = after[rme] = level + 1
        at = (level * span + k) * top
        prio[me] = at + me
        prio[rme] = at + rme
        # the send and its receive, their connection fields set at creation (at most three
        # values per statement: unpacking more builds and frees a tuple every time)
        snd, rcv = Instr(), Instr()
        snd.id, rcv.id = me, rme
        snd.rank, rcv.rank = sr, dr
        snd.op, snd.src, snd.dst = "send", src, None
        if reduce:
            rcv.op, rcv.src = "recv_reduce_copy", dst
        else:
            rcv.op, rcv.src = "recv", None
        rcv.dst = dst
        snd.count = rcv.count = c
        snd.seq = rcv.seq = k
        snd.ch = rcv.ch = o.ch
        snd.inst = rcv.inst = o.inst
        snd.preds, rcv.preds = spreds, rpreds
        snd.sp, rcv.sp = dr, -1
        snd.rp, rcv.rp = -1, sr
        snd.sendtb, rcv.sendtb = o.sendtb, -1
        snd.recvtb, rcv.recvtb = -1, o.recvtb
        snd.match, rcv.match = rme, me
        snd.level = rcv.level = level
        snd.tb = rcv.tb = None
        snd.step = rcv.step = -1
        snd.absorbed = rcv.absorbed = -1
        new(snd)
        new(rcv)
    n = len(instrs)
    del reader[n:], nreaders[n:], overwritten[n:], prio[n:]
    dag.reader, dag.nreaders, dag.overwritten = reader, nreaders, overwritten
    dag.prio, dag.scale = prio, top
    dag.carrier = list(range(n))
