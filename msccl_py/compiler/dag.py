"""The instruction DAG: per-slot read/write hazards and send↔recv pairs.

Each operation becomes one local instruction (``copy``/``reduce``) or a
``send`` on the source rank matched with a ``recv``/``recv_reduce_copy`` on
the destination rank. Hazard edges (RAW, WAR, WAW) are per chunk slot and
always join instructions of one rank; ranks meet only through matches.
Edges run from lower to higher ``seq`` (program order), which later passes
rely on.

Each instruction also gets a ``level``: the communication round it could
run in, one more than the latest transfer it depends on. The scheduler
prefers low levels, so a program written chunk by chunk still runs round by
round (a ring allgather moves every rank's chunk in the first round).
"""

from __future__ import annotations

from msccl_py.compiler.trace import Op


class Instr:
    """One instruction on one rank. ``src``/``dst`` are ``(buffer key, index)``."""

    __slots__ = ("id", "rank", "op", "src", "dst", "count", "sp", "rp", "ch", "inst", "sendtb",
                 "recvtb", "seq", "opi", "preds", "match", "peer_src", "peer_dst", "readers",
                 "overwritten", "alive", "level", "tb", "step", "fused_from",
                 "absorbed")

    def __init__(self, id, rank, op, src, dst, count, seq, opi, ch, inst):
        self.id = id
        self.rank = rank
        self.op = op
        self.src = src
        self.dst = dst
        self.count = count
        self.sp = -1
        self.rp = -1
        self.ch = ch
        self.inst = inst
        self.sendtb = -1
        self.recvtb = -1
        self.seq = seq
        self.opi = opi
        self.preds: set | list = set()
        self.match = -1
        self.peer_src = None
        self.peer_dst = None
        self.readers = None
        self.overwritten = 0
        self.alive = True
        self.level = 0
        self.tb = None
        self.step = -1
        self.fused_from = -1
        self.absorbed = -1


class Dag:
    """Instructions of a program, with per-instruction predecessor sets."""

    def __init__(self, ops: list[Op], buffer_sizes: list[dict]):
        self.ops = ops
        self.instrs: list[Instr] = []
        self._slots: dict = {}
        self._sizes = buffer_sizes
        for k, op in enumerate(ops):
            self._add(k, op)
        self._slots = {}

    def _state(self, rank: int, buf):
        key = (rank, buf)
        st = self._slots.get(key)
        if st is None:
            n = self._sizes[rank][buf]
            st = self._slots[key] = ([-1] * n, [None] * n)
        return st

    def _new(self, rank, op, src, dst, count, k, o: Op) -> Instr:
        instrs = self.instrs
        ins = Instr(len(instrs), rank, op, src, dst, count, k, k, o.ch, o.inst)
        instrs.append(ins)
        return ins

    def _read(self, ins: Instr, rank: int, buf, start: int, count: int) -> None:
        writers, readers = self._state(rank, buf)
        me = ins.id
        instrs = self.instrs
        preds = ins.preds
        for j in range(start, start + count):
            w = writers[j]
            if w >= 0 and w != me:
                preds.add(w)
                wi = instrs[w]
                if wi.readers is None:
                    wi.readers = {me}
                else:
                    wi.readers.add(me)
            rs = readers[j]
            if rs is None:
                readers[j] = [me]
            else:
                rs.append(me)

    def _write(self, ins: Instr, rank: int, buf, start: int, count: int) -> None:
        writers, readers = self._state(rank, buf)
        me = ins.id
        instrs = self.instrs
        preds = ins.preds
        for j in range(start, start + count):
            w = writers[j]
            if w >= 0 and w != me:
                preds.add(w)
                instrs[w].overwritten += 1
            rs = readers[j]
            if rs is not None:
                preds.update(rs)
                readers[j] = None
            writers[j] = me
        preds.discard(me)

    def _ready(self, preds) -> int:
        """First round after every predecessor: transfers take a round, local ops none."""
        instrs = self.instrs
        level = 0
        for q in preds:
            p = instrs[q]
            f = p.level + 1 if p.match >= 0 else p.level
            if f > level:
                level = f
        return level

    def _add(self, k: int, o: Op) -> None:
        src = (o.src_buf, o.src_idx)
        dst = (o.dst_buf, o.dst_idx)
        c = o.size
        if o.src_rank == o.dst_rank:
            r = o.src_rank
            ins = self._new(r, "copy" if o.kind == "copy" else "reduce", src, dst, c, k, o)
            ins.sendtb = o.sendtb if o.sendtb >= 0 else o.recvtb
            self._read(ins, r, o.src_buf, o.src_idx, c)
            if o.kind == "reduce":
                self._read(ins, r, o.dst_buf, o.dst_idx, c)
            self._write(ins, r, o.dst_buf, o.dst_idx, c)
            ins.level = self._ready(ins.preds)
            return
        s = self._new(o.src_rank, "send", src, None, c, k, o)
        s.sp = o.dst_rank
        s.sendtb = o.sendtb
        s.peer_dst = dst
        self._read(s, o.src_rank, o.src_buf, o.src_idx, c)
        r = self._new(o.dst_rank, "recv" if o.kind == "copy" else "recv_reduce_copy",
                      dst if o.kind == "reduce" else None, dst, c, k, o)
        r.rp = o.src_rank
        r.recvtb = o.recvtb
        r.peer_src = src
        if o.kind == "reduce":
            self._read(r, o.dst_rank, o.dst_buf, o.dst_idx, c)
        self._write(r, o.dst_rank, o.dst_buf, o.dst_idx, c)
        s.match = r.id
        r.match = s.id
        s.level = r.level = max(self._ready(s.preds), self._ready(r.preds))
