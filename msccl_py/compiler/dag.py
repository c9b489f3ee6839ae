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
    ``peer_src``/``peer_dst`` the sender's source / receiver's destination; ``seq`` is the
    index of the trace operation behind it."""

    __slots__ = ("id", "rank", "op", "src", "dst", "count", "sp", "rp", "ch", "inst", "sendtb",
                 "recvtb", "seq", "preds", "match", "peer_src", "peer_dst", "reader",
                 "nreaders", "overwritten", "alive", "level", "tb", "step", "fused_from", "absorbed")

    def __init__(self, id, rank, op, src, dst, count, seq, ch, inst, preds, sp=-1, rp=-1,
                 sendtb=-1, recvtb=-1, match=-1, peer_src=None, peer_dst=None, level=0):
        self.id = id
        self.rank = rank
        self.op = op
        self.src = src
        self.dst = dst
        self.count = count
        self.seq = seq
        self.ch = ch
        self.inst = inst
        self.preds: list[int] | tuple = preds  # no repeats; () when none
        self.sp = sp
        self.rp = rp
        self.sendtb = sendtb
        self.recvtb = recvtb
        self.match = match
        self.peer_src = peer_src
        self.peer_dst = peer_dst
        self.reader = -1  # the latest instruction to read what this wrote
        self.nreaders = 0  # how many distinct ones did
        self.overwritten = 0
        self.alive = True
        self.level = level
        self.tb = None
        self.step = -1
        self.fused_from = -1
        self.absorbed = -1


_NO_PREDS: tuple = ()  # shared by the many instructions without predecessors


class Dag:
    """Instructions of a program, with per-instruction predecessor lists (no repeats).

    ``sizes[rank]`` is ``{"i": chunks, "o": chunks, "s": chunks}`` and
    ``offsets[rank]`` maps a scratch key ``("s", name)`` to its first chunk
    in ``s``.
    """

    def __init__(self, ops: list[Op], sizes: list[dict], offsets: list[dict] | None = None):
        self.ops = ops
        self.instrs: list[Instr] = []
        self.carrier: list[int] = []  # set by ``schedule``: the live instruction carrying each id
        _build(self, ops, sizes, offsets or [{} for _ in sizes])


def _build(dag: Dag, ops: list[Op], sizes: list[dict], offsets: list[dict]) -> None:
    instrs = dag.instrs
    new = instrs.append
    # per rank and physical buffer: last writer of each slot, readers since that write
    writers = [{b: [-1] * n for b, n in s.items()} for s in sizes]
    readers = [{b: [None] * n for b, n in s.items()} for s in sizes]
    # mark[i] == me: i is me or already in me's preds (read only for multi-chunk operations)
    mark = [-1] * (2 * len(ops))
    # interned Locs by buffer and offset (identity is equality for later passes)
    locs = {b: [None] * max([sz.get(b, 0) for sz in sizes] + [0]) for b in ("i", "o", "s")}
    Loc = ir.Loc

    def access(me, preds, rank, buf, start, count, write):
        """Record ``me`` reading or writing ``count`` slots; extend ``preds``."""
        W = writers[rank][buf]
        R = readers[rank][buf]
        for j in range(start, start + count):
            w = W[j]
            if w >= 0 and mark[w] != me:
                mark[w] = me
                preds.append(w)
            if write:
                if w >= 0:
                    instrs[w].overwritten += 1
                rs = R[j]
                if rs is not None:
                    for q in rs:
                        if mark[q] != me:
                            mark[q] = me
                            preds.append(q)
                    R[j] = None
                W[j] = me
            else:
                if w >= 0:
                    wi = instrs[w]
                    if wi.reader != me:
                        wi.reader = me
                        wi.nreaders += 1
                rs = R[j]
                if rs is None:
                    R[j] = [me]
                elif rs[-1] != me:
                    rs.append(me)

    def ready(preds) -> int:
        """First round after every predecessor: transfers take a round, local ops none."""
        level = 0
        for q in preds:
            p = instrs[q]
            f = p.level + 1 if p.match >= 0 else p.level
            if f > level:
                level = f
        return level

    for k, o in enumerate(ops):
        sr, dr, c = o.src_rank, o.dst_rank, o.size
        sb, si, db, di = o.src_buf, o.src_idx, o.dst_buf, o.dst_idx
        if sb != "i" and sb != "o":
            si += offsets[sr][sb]
            sb = "s"
        if db != "i" and db != "o":
            di += offsets[dr][db]
            db = "s"
        row = locs[sb]
        src = row[si]
        if src is None:
            src = row[si] = Loc(sb, si)
        row = locs[db]
        dst = row[di]
        if dst is None:
            dst = row[di] = Loc(db, di)
        reduce = o.kind == "reduce"
        me = len(instrs)
        if sr == dr:
            mark[me] = me  # never its own predecessor
            preds: list[int] = []
            ins = Instr(me, sr, "reduce" if reduce else "copy", src, dst, c, k, o.ch, o.inst,
                        preds)
            ins.sendtb = o.sendtb if o.sendtb >= 0 else o.recvtb
            new(ins)
            access(me, preds, sr, sb, si, c, False)
            if reduce:
                access(me, preds, sr, db, di, c, False)
            access(me, preds, sr, db, di, c, True)
            if preds:
                ins.level = ready(preds)
            continue
        if c == 1:
            # one slot each side (nearly every operation): the hazards of ``access``
            # without its bookkeeping, as no predecessor can repeat
            level = 0
            w = writers[sr][sb][si]
            if w >= 0:
                spreds = [w]
                wi = instrs[w]
                if wi.reader != me:
                    wi.reader = me
                    wi.nreaders += 1
                level = wi.level + 1 if wi.match >= 0 else wi.level
            else:
                spreds = _NO_PREDS
            R = readers[sr][sb]
            rs = R[si]
            if rs is None:
                R[si] = [me]
            else:
                rs.append(me)
            rme = me + 1
            W = writers[dr][db]
            R = readers[dr][db]
            w = W[di]
            rs = R[di]
            if w >= 0:
                rpreds = [w]
                wi = instrs[w]
                wi.overwritten += 1
                if reduce and wi.reader != rme:
                    wi.reader = rme
                    wi.nreaders += 1
                f = wi.level + 1 if wi.match >= 0 else wi.level
                if f > level:
                    level = f
                if rs is not None:
                    rpreds.extend(rs)
            elif rs is not None:
                rpreds = rs  # the slot's reader list is dropped below: take it over
            else:
                rpreds = _NO_PREDS
            if rs is not None:
                for q in rs:
                    qi = instrs[q]
                    f = qi.level + 1 if qi.match >= 0 else qi.level
                    if f > level:
                        level = f
                R[di] = None
            W[di] = rme
        else:
            mark[me] = me
            mark[me + 1] = me + 1
            spreds, rpreds = [], []
            access(me, spreds, sr, sb, si, c, False)
            if reduce:
                access(me + 1, rpreds, dr, db, di, c, False)
            access(me + 1, rpreds, dr, db, di, c, True)
            level = ready(spreds) if spreds else 0
            if rpreds:
                lr = ready(rpreds)
                if lr > level:
                    level = lr
        ch, inst = o.ch, o.inst
        # the send and its receive, their connection fields set at creation
        new(Instr(me, sr, "send", src, None, c, k, ch, inst, spreds, dr, -1, o.sendtb, -1,
                  me + 1, None, dst, level))
        new(Instr(me + 1, dr, "recv_reduce_copy" if reduce else "recv",
                  dst if reduce else None, dst, c, k, ch, inst, rpreds, -1, sr, -1, o.recvtb,
                  me, src, None, level))
