"""The shm backend for MSCCL++ plans: one OS process per rank over one shared arena.

It reuses the shm runtime's process group and arena
(:mod:`msccl_py.runtime.process_group`, :mod:`msccl_py.runtime.shm_arena`)
and runs the same operation semantics as the reference backend
(:mod:`msccl_py.mscclpp.interp`), but each rank's process runs only its own
threadblocks, and every buffer, LL packet flag and signal counter lives in
the arena, so a put writes straight into the peer's memory and a wait spins
on a counter the peer increments. Each counter has one writer (the rank at
the other end of the channel pair), so plain stores suffice. A rank that
sees no progress for ``timeout`` seconds aborts the group with a report of
what its threadblocks wait on.

>>> from msccl_py.mscclpp.read import read_plan            # doctest: +SKIP
>>> plan = read_plan("tests/data/mscclpp/single_node/allreduce_4.json")   # doctest: +SKIP
>>> outs = run_shm(plan, inputs, op="sum")                   # doctest: +SKIP
"""

from __future__ import annotations

import time

import numpy as np

from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.mscclpp.engine import PlanInvalid, Machine
from msccl_py.mscclpp.interp import Runner
from msccl_py.mscclpp.ir import Plan
from msccl_py.mscclpp.runtime import message_bytes, reduce_op

ALIGN = 64


def _layout(m: Machine, dtype: np.dtype):
    """Per rank: name -> (byte offset, dtype, count) in its data region; and the region size."""
    per_rank = [[] for _ in range(m.plan.nranks)]
    for key, arr in m.base.items():
        per_rank[key[0]].append((("base",) + key, dtype, arr.size))
    for r in range(m.plan.nranks):
        for buf in ("i", "o", "s"):
            n = m.view[(r, buf)][2]
            per_rank[r] += [(("pkt", r, buf), dtype, n), (("valid", r, buf), np.dtype(np.uint8), n)]
        per_rank[r] += [(("counters", r), np.dtype(np.int64), len(m.counter_keys[r])),
                        (("flags", r), np.dtype(np.int64), 2)]
    out, size = [], 0
    for items in per_rank:
        table, off = {}, 0
        for name, dt, n in items:
            table[name] = (off, dt, n)
            off += -(-max(n, 1) * dt.itemsize // ALIGN) * ALIGN
        out.append(table)
        size = max(size, off)
    return out, size


class SharedMachine(Machine):
    """A :class:`Machine` for one rank whose memory and signal counters live in the arena."""

    def __init__(self, plan, nbytes, inputs, reduce, rt, rank: int):
        super().__init__(plan, nbytes, inputs, reduce, track=False)
        self.rt, self.rank = rt, rank
        self.tbs = [(r, tb) for r, tb in self.tbs if r == rank]
        self.counter_keys = [sorted({k for k in self.pair.values() if k[0] == r}, key=str)
                             for r in range(plan.nranks)]
        self.counter_at = {k: (k[0], i) for r in range(plan.nranks)
                           for i, k in enumerate(self.counter_keys[r])}
        dtype = inputs[rank].dtype
        tables, _ = _layout(self, dtype)
        mine = {key: arr for key, arr in self.base.items() if key[0] == rank}

        def view(r, name):
            off, dt, n = tables[r][name]
            region = rt.arena.data_view(r, 0, np.dtype(np.uint8), tables[r][name][0] + n * dt.itemsize)
            return region[off:off + n * dt.itemsize].view(dt)
        self.base = {key: view(key[0], ("base",) + key) for key in self.base}
        for key, arr in mine.items():
            self.base[key][:] = arr
        self.pkt = {(r, b): [view(r, ("pkt", r, b)), view(r, ("valid", r, b)).view(bool),
                             np.full(self.view[(r, b)][2], -1, np.int64)]
                    for r in range(plan.nranks) for b in ("i", "o", "s")}
        self.counters = [view(r, ("counters", r)) for r in range(plan.nranks)]
        self.flags = [view(r, ("flags", r)) for r in range(plan.nranks)]
        self.taken = {}
        self.last = time.monotonic()
        self.report = lambda: ""

    def join(self, g, vis, exe):
        return

    def read_packets(self, g, ev, rank, buf, off, n):
        return self.packets(rank, buf)[0][off:off + n].copy()

    def write_packets(self, g, ev, rank, buf, off, values, valid=None):
        vals, ok, _ = self.packets(rank, buf)
        vals[off:off + values.size] = values
        ok[off:off + values.size] = True if valid is None else valid   # flags after payload
        self.clobber_data(g, ev, rank, buf, off, values.size)

    def has_signal(self, key) -> bool:
        r, i = self.counter_at[key]
        return int(self.counters[r][i]) > self.taken.get(key, 0)

    def take_signal(self, g, key, relaxed):
        self.taken[key] = self.taken.get(key, 0) + 1

    def post_signal(self, g, key, where=""):
        r, i = self.counter_at[key]
        self.counters[r][i] += 1

    def idle(self) -> bool:
        self.rt.check_abort()
        now = time.monotonic()
        if now - self.last > self.rt.timeout:
            return False
        time.sleep(0.0005)
        return True

    def rendezvous(self, flag: int) -> None:
        """Mark this rank at ``flag`` (0 started, 1 done) and wait for every rank to get there."""
        self.flags[self.rank][flag] = 1
        deadline = time.monotonic() + self.rt.timeout
        while not all(int(f[flag]) for f in self.flags):
            self.rt.check_abort()
            if time.monotonic() > deadline:
                late = [r for r, f in enumerate(self.flags) if not int(f[flag])]
                raise MscclDeadlockError(f"rank {self.rank}: ranks {late} never "
                                         f"{'started' if flag == 0 else 'finished'}")
            time.sleep(0.0005)


class SharedRunner(Runner):
    """A :class:`Runner` that notes when its rank last made progress (for the no-progress timeout)."""

    def run(self, g, st):
        super().run(g, st)
        self.m.last = time.monotonic()


def _rank_main(rt, conn, plan: Plan, nbytes: int, inputs: list[np.ndarray], op: str):
    from msccl_py.runtime import shm_arena as A
    try:
        m = SharedMachine(plan, nbytes, inputs, reduce_op(op), rt, rt.rank)
    except PlanInvalid as exc:
        raise MscclRuntimeError(f"invalid: {exc}") from None
    run = SharedRunner(m)
    m.rendezvous(0)
    m.last = time.monotonic()
    try:
        run.loop()
    except PlanInvalid as exc:
        raise MscclRuntimeError(f"invalid: {exc}") from None
    if run.deadlocks:
        text = "; ".join(line.removeprefix("deadlock: ") for line in run.deadlocks)
        rt.write_report(text)
        rt.abort(A.ABORT_DEADLOCK, f"no progress for {rt.timeout:g} s; first noticed by rank {rt.rank}")
        raise MscclDeadlockError(f"rank {rt.rank}: {text}")
    m.rendezvous(1)
    base, lo, n = m.view[(rt.rank, "o")]
    return m.base[base][lo:lo + n].copy()


def run_shm(plan: Plan, inputs: list[np.ndarray], op: str = "sum",
            timeout: float | None = None) -> list[np.ndarray]:
    """Each rank's output after running ``plan`` once with one process per rank."""
    from msccl_py.runtime.process_group import DEFAULT_TIMEOUT, ProcessGroup
    nbytes = message_bytes(plan, inputs)
    reduce = reduce_op(op)
    try:
        probe = Machine(plan, nbytes, [np.ascontiguousarray(x) for x in inputs], reduce, track=False)
    except PlanInvalid as exc:
        raise MscclRuntimeError(f"invalid: {exc}") from None
    probe.counter_keys = [sorted({k for k in probe.pair.values() if k[0] == r}, key=str)
                          for r in range(plan.nranks)]
    _, heap = _layout(probe, inputs[0].dtype)
    with ProcessGroup(plan.nranks, buffsize=4096, data_bytes=heap,
                      timeout=timeout or min(DEFAULT_TIMEOUT, 10.0)) as group:
        group.start(_rank_main, (plan, nbytes, [np.ascontiguousarray(x) for x in inputs], op))
        return group.wait()
