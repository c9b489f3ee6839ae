"""Symbolic data: buffers of multisets of (origin rank, origin chunk).

A value is a sorted tuple of encoded origins (``rank * STRIDE + chunk``), so
reductions concatenate and a double-counted or missing contribution shows up
as an unequal tuple; ``None`` is data nobody wrote. In-place calls alias
buffers through the plan's alias table, so writes through one name are seen
through the other. Every write records the plan step row that made it, for
the diagnosis of a wrong chunk. A state holds a reduction as a join of its
operands and sorts it into its tuple when it is read: a chain of reductions
(a ring's 127 on one chunk) then costs one small object a step, not a copy of
the growing tuple each time.

>>> encode(3, 5) == 3 * STRIDE + 5, decode(encode(3, 5))
(True, (3, 5))
>>> describe((encode(0, 1), encode(1, 1)))
'{(0,1) (1,1)}'
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from msccl_py.plan.tables import (
    B_RANK,
    BUF_CODE,
    BUF_NAMES,
    LOCAL_DST,
    LOCAL_SRC,
    OP_COPY,
    OP_RCS,
    OP_RECV,
    OP_REDUCE,
    OP_RRC,
    OP_RRCS,
    OP_RRS,
    OP_SEND,
    S_BLOCK,
    S_COUNT,
    S_DST_BUF,
    S_DST_OFF,
    S_OP,
    S_SRC_BUF,
    S_SRC_OFF,
    Plan,
)
from msccl_py.verify.races import MAX_CLOCK_CELLS, RaceDetector

STRIDE = 1 << 24
Value = "tuple[int, ...] | None"


def encode(rank: int, chunk: int) -> int:
    """Origin code of input chunk ``chunk`` of rank ``rank``."""
    return rank * STRIDE + chunk


def decode(code: int) -> tuple[int, int]:
    """(rank, chunk) of an origin code."""
    return divmod(code, STRIDE)


def single(rank: int, chunk: int) -> tuple[int, ...]:
    """The value of one original input chunk."""
    return (rank * STRIDE + chunk,)


def _pair(code: int) -> str:
    r, k = decode(code)
    return f"({r},{k})"


def describe(value) -> str:
    """A short human form of a value: ``{(rank,chunk) ...}`` or ``uninitialized``."""
    if value is None:
        return "uninitialized data"
    if len(value) > 12:
        head = " ".join(_pair(c) for c in value[:10])
        return f"{{{head} ... {len(value)} contributions}}"
    return "{" + " ".join(_pair(c) for c in value) + "}"


def difference(got, want) -> str:
    """What ``got`` lacks and has in excess compared with ``want``."""
    if got is None or want is None:
        return ""
    from collections import Counter
    g, w = Counter(got), Counter(want)
    missing, extra = w - g, g - w
    parts = []
    if missing:
        parts.append("missing " + " ".join(
            _pair(c) + (f"x{n}" if n > 1 else "") for c, n in sorted(missing.items())))
    if extra:
        parts.append("extra " + " ".join(
            _pair(c) + (f"x{n}" if n > 1 else "") for c, n in sorted(extra.items())))
    return "; ".join(parts)


def reduce2(a, b):
    """Multiset union of two values (``None`` poisons)."""
    if a is None or b is None:
        return None
    return tuple(sorted(a + b))


class _Join:
    """The multiset union of two non-empty values, sorted only when read (:func:`_canon`):
    a chain of reductions then costs one small object a step, not a copy of a growing
    tuple. States hold these; every value they hand out is a plain sorted tuple."""

    __slots__ = ("a", "b", "canon")

    def __init__(self, a, b):
        self.a, self.b, self.canon = a, b, None


def _canon(value):
    """The plain value (sorted tuple or None) of a held value; a join's is made once."""
    if type(value) is not _Join:
        return value
    if value.canon is None:
        origins: list = []
        stack = [value]
        while stack:
            x = stack.pop()
            while type(x) is _Join and x.canon is None:   # down a chain of reductions
                stack.append(x.b)
                x = x.a
            origins.extend(x.canon if type(x) is _Join else x)
        value.canon = tuple(sorted(origins))
    return value.canon


def _reduce(a, b):
    """:func:`reduce2` of two held values: a join, or at once when one is empty (or None)."""
    if a is None or b is None:
        return None
    if a and b:
        return _Join(a, b)
    return tuple(sorted(tuple(_canon(a)) + tuple(_canon(b))))


def _pick(items: list, at: list) -> list:
    """``[items[i] for i in at]``, by one C call."""
    return list(itemgetter(*at)(items)) if len(at) > 1 else [items[i] for i in at]


class SymbolicState:
    """Per-rank physical buffers of values, with in-place aliasing and last writers.

    ``initial`` maps ``(rank, buffer name)`` to a list of values for the logical
    buffer (``None`` entries leave a slot unwritten). ``plan`` must pass the static
    rules (every operand inside its buffer), as the verifier ensures before it runs.
    """

    def __init__(self, plan: Plan, inplace: bool, initial: dict, races: bool = True):
        self.plan = plan
        alias = plan.aliases(inplace)
        nranks = len(plan.chunks)
        al = alias.tolist()   # [rank][buffer] = [physical buffer, chunk offset]
        sizes = [[0, 0, 0] for _ in range(nranks)]
        for r, calls, chunks in zip(range(nranks), plan.call_chunks.tolist(),
                                    plan.chunks.tolist()):
            for b in range(3):
                base, off = al[r][b]
                sizes[r][base] = max(sizes[r][base], off + max(calls[b], chunks[b]))
        self.phys = [[[None] * sizes[r][b] for b in range(3)] for r in range(nranks)]
        self.writer = [[[-1] * sizes[r][b] for b in range(3)] for r in range(nranks)]
        #: views[r][b] = (physical list, writer list, chunk offset)
        self.views = [[(self.phys[r][al[r][b][0]], self.writer[r][al[r][b][0]], al[r][b][1])
                       for b in range(3)] for r in range(nranks)]
        #: id(physical list) -> (rank, buffer name), to name a raced chunk
        self.names = {id(self.phys[r][b]): (r, BUF_NAMES[b]) for r in range(nranks)
                      for b in range(3)}
        for (r, name), values in initial.items():
            buf, _w, off = self.views[r][BUF_NAMES.index(name)]
            if off + len(values) <= len(buf) and None not in values:
                buf[off:off + len(values)] = values   # the usual case, in one slice
                continue
            for k, v in enumerate(values):
                if v is not None and off + k < len(buf):
                    buf[off + k] = v
        # per step row: (op, count, src list, src off, dst list, dst writer, dst off), the
        # local operands resolved through the aliases by NumPy, column by column
        st = plan.steps
        op = st[:, S_OP]
        rank = plan.blocks[st[:, S_BLOCK], B_RANK]
        lists = [lst for bufs in self.phys for lst in bufs]   # rank r buffer b at 3r + b
        writers = [w for bufs in self.writer for w in bufs]
        self._lists = lists
        lists.append(None)    # index -1: no local operand
        writers.append(None)
        self._operands = []
        for local, buf_col, off_col in ((LOCAL_SRC, S_SRC_BUF, S_SRC_OFF),
                                        (LOCAL_DST, S_DST_BUF, S_DST_OFF)):
            buf = st[:, buf_col]
            used = local[op] & (buf >= 0)
            b = np.where(used, buf, 0)
            where = np.where(used, 3 * rank + alias[rank, b, 0], -1)
            off = np.where(used, alias[rank, b, 1] + st[:, off_col], 0)
            self._operands.append((where, off))
        (src_at, soff), (dst_at, doff) = self._operands
        src_at, dst_at = src_at.tolist(), dst_at.tolist()
        self._ops = list(zip(op.tolist(), plan.step_column(S_COUNT), _pick(lists, src_at),
                             soff.tolist(), _pick(lists, dst_at), _pick(writers, dst_at),
                             doff.tolist()))
        lists.pop()
        self.races = self._race_detector(plan) if races else None

    def _race_detector(self, plan: Plan) -> RaceDetector | None:
        """A detector over the threadblocks that share a chunk; None when none does (nothing
        can race) or when its clocks would be too large (detection skipped)."""
        # every chunk access (a step's local operand, one chunk at a time) as a key into all
        # physical lists laid end to end; operands lie inside their buffers (static rules)
        lists = self._lists
        first = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum([len(lst) for lst in lists], out=first[1:])
        count = plan.steps[:, S_COUNT]
        block = plan.steps[:, S_BLOCK]
        keys, blocks, steps = [], [], []
        for where, off in self._operands:
            g = np.flatnonzero((where >= 0) & (count > 0))
            c = count[g]
            runs = np.repeat(first[where[g]] + off[g], c)
            starts = np.repeat(np.cumsum(c) - c, c)
            keys.append(runs + np.arange(len(runs)) - starts)
            blocks.append(np.repeat(block[g], c))
            steps.append(np.repeat(g, c))
        keys, blocks, steps = (np.concatenate(x) for x in (keys, blocks, steps))
        # a chunk is shared when two different threadblocks touch it
        lo = np.full(first[-1], plan.nblocks, dtype=np.int64)
        hi = np.full(first[-1], -1, dtype=np.int64)
        np.minimum.at(lo, keys, blocks)
        np.maximum.at(hi, keys, blocks)
        shared = hi > lo
        hit = shared[keys]
        mark = np.zeros(plan.nblocks, dtype=bool)   # (np.unique would sort, and load numpy.ma)
        mark[blocks[hit]] = True
        watched = np.flatnonzero(mark).tolist()
        if not watched or plan.nblocks * len(watched) > MAX_CLOCK_CELLS:
            return None
        #: the chunks worth reporting to the detector, and the step rows touching any
        at = np.flatnonzero(shared)
        which = np.searchsorted(first, at, side="right") - 1
        self._shared = {(id(lists[li]), j) for li, j in zip(which.tolist(),
                                                          (at - first[which]).tolist())}
        touches = np.zeros(plan.nsteps, dtype=bool)
        touches[steps[hit]] = True
        self._touches_shared = touches.tolist()
        return RaceDetector(plan, watched)

    def value(self, rank: int, buffer: str, index: int):
        """Current value of logical ``buffer[index]`` of ``rank``."""
        buf, _w, off = self.views[rank][BUF_NAMES.index(buffer)]
        return _canon(buf[off + index]) if off + index < len(buf) else None

    def mismatches(self, expected: dict) -> tuple[int, tuple | None]:
        """How many ``{(rank, buffer, index): value}`` entries differ, and the first one's key.

        Slots mostly hold shared value objects (a copied chunk is one tuple), so each
        distinct (held, expected) pair is compared once.
        """
        views = self.views
        codes = BUF_CODE
        # id(held) -> (expected, differ) for the last expected value it was compared with;
        # every object stays alive while this runs, so the ids stay unique
        verdicts: dict = {}
        nbad, first = 0, None
        at_r = at_buf = None
        lst, off, size = [], 0, 0
        for key, want in expected.items():
            r, buf, k = key
            if r != at_r or buf != at_buf:  # keys come buffer by buffer: one lookup each
                at_r, at_buf = r, buf
                lst, _w, off = views[r][codes[buf]]
                size = len(lst)
            i = off + k
            got = lst[i] if i < size else None
            seen = verdicts.get(id(got))
            if seen is not None and seen[0] is want:
                bad = seen[1]
            else:
                bad = _canon(got) != want
                verdicts[id(got)] = (want, bad)
            if bad:
                nbad += 1
                if first is None:
                    first = key
        return nbad, first

    def last_writer(self, rank: int, buffer: str, index: int) -> int:
        """Plan step row that last wrote logical ``buffer[index]`` (-1: never written)."""
        _b, w, off = self.views[rank][BUF_NAMES.index(buffer)]
        return w[off + index] if off + index < len(w) else -1

    def snapshot(self, rank: int, buffer: str, n: int) -> list:
        """The first ``n`` values of a logical buffer."""
        return [self.value(rank, buffer, k) for k in range(n)]

    @property
    def complete(self):
        """The model's step-finished hook (``complete(step_row)``): the race detector's, or
        None when no detector runs."""
        return None if self.races is None else self.races.complete

    def race(self) -> str | None:
        """The first data race found, as a sentence, or None."""
        hb = self.races
        if hb is None or hb.race is None:
            return None
        sid, idx = hb.race[0]
        _rank, name = self.names[sid]
        return hb.describe(f"{name}[{idx}]")

    @property
    def transfer(self):
        """The model's transfer hook, ``transfer(g, lo, hi, payload, iteration)``: apply
        chunks ``[lo, hi)`` of step row ``g`` and return what it sends (or None). Without a
        race detector it is :meth:`_apply` itself (a property, not an attribute holding
        the bound method, so the state is no reference cycle and goes when it is dropped)."""
        return self._apply if self.races is None else self._transfer_stamped

    def _transfer_stamped(self, g: int, lo: int, hi: int, payload, iteration: int = 0):
        hb = self.races
        if lo == 0:
            hb.begin(g)
        if payload is not None:
            payload, stamp = payload
            hb.receive(g, stamp)
        op, _c, src, soff, dst, _w, doff = self._ops[g]
        if self._touches_shared[g]:  # chunks one threadblock alone touches cannot race
            shared = self._shared
            if src is not None:
                sid = id(src)
                for j in range(soff + lo, soff + hi):
                    if (sid, j) in shared:
                        hb.read(g, (sid, j))
            if dst is not None:
                did = id(dst)
                if op == OP_REDUCE:
                    for j in range(doff + lo, doff + hi):
                        if (did, j) in shared:
                            hb.read(g, (did, j))
                for j in range(doff + lo, doff + hi):
                    if (did, j) in shared:
                        hb.write(g, (did, j))
        out = self._apply(g, lo, hi, payload)
        return None if out is None else (out, hb.stamp(g))

    def _apply(self, g: int, lo: int, hi: int, payload, iteration: int = 0):
        op, _c, src, soff, dst, dwr, doff = self._ops[g]
        if hi - lo == 1:  # one chunk (most transfers): index the lists, no slices
            if op == OP_SEND:
                return [src[soff + lo]]
            d = doff + lo
            if op == OP_RECV or op == OP_RCS:
                dst[d] = payload[0]
                dwr[d] = g
                return payload if op == OP_RCS else None
            if op == OP_COPY:
                dst[d] = src[soff + lo]
                dwr[d] = g
                return None
            a = dst[d] if op == OP_REDUCE else payload[0]
            b = src[soff + lo]
            v = None if a is None or b is None else _Join(a, b) if a and b else _reduce(a, b)
            if op == OP_RRS:
                return [v]
            dst[d] = v
            dwr[d] = g
            return [v] if op == OP_RRCS else None
        if op == OP_SEND:
            return src[soff + lo:soff + hi]
        if op == OP_RECV or op == OP_RCS:
            dst[doff + lo:doff + hi] = payload
            dwr[doff + lo:doff + hi] = [g] * (hi - lo)
            return payload if op == OP_RCS else None
        if op == OP_COPY:
            dst[doff + lo:doff + hi] = src[soff + lo:soff + hi]
            dwr[doff + lo:doff + hi] = [g] * (hi - lo)
            return None
        if op == OP_REDUCE:
            dst[doff + lo:doff + hi] = [_reduce(a, b) for a, b in
                                        zip(dst[doff + lo:doff + hi], src[soff + lo:soff + hi])]
            dwr[doff + lo:doff + hi] = [g] * (hi - lo)
            return None
        # recv_reduce_*: received (+) local source
        out = [_reduce(a, b) for a, b in zip(payload, src[soff + lo:soff + hi])]
        if op == OP_RRC or op == OP_RRCS:
            dst[doff + lo:doff + hi] = out
            dwr[doff + lo:doff + hi] = [g] * (hi - lo)
        return out if op in (OP_RRS, OP_RRCS) else None
