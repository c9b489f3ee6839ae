"""The shm backend for MSCCL++ plans: one OS process per rank over one shared arena.

It reuses the shm runtime's process group, arena and wake-up protocol
(:mod:`msccl_py.runtime.process_group`, :mod:`msccl_py.transport.shm_arena`,
:mod:`msccl_py.runtime.shm_exec`). Every rank's buffers, LL packets and
signal counters live in the arena (:mod:`msccl_py.runtime.mscclpp.shm_program`), so
a put writes straight into the peer's memory and a wait polls a counter the
peer increments. The rank processes stay alive in a pool between calls, as
the XML runtime's do: the parent compiles each call shape once, writes the
inputs into the arena, and each rank clears its own memory, enters the call,
meets its peers and runs its threadblocks, in compiled code
(:mod:`msccl_py.runtime.mscclpp.shm_native`) or, with ``MSCCL_PY_SHM_EXECUTOR=python``
or no C++ compiler, in the reference backend's interpreter
(:mod:`msccl_py.plan.mscclpp.execute`). Both give the reference backend's results
bit for bit. A rank that sees no progress for ``timeout`` seconds ends the
call with :class:`~msccl_py.errors.MscclDeadlockError`, one line per waiting
rank naming what its threadblocks wait on, as the XML runtime reports.

>>> from msccl_py.targets.mscclpp.read import read_plan            # doctest: +SKIP
>>> plan = read_plan("tests/data/mscclpp/single_node/allreduce_4.json")   # doctest: +SKIP
>>> outs = run_shm(plan, inputs, op="sum")                   # doctest: +SKIP
"""

from __future__ import annotations

import pickle
import time

import numpy as np

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.mscclpp import shm_native
from msccl_py.plan.mscclpp.memory import Machine, PlanInvalid
from msccl_py.plan.mscclpp.geometry import geometry
from msccl_py.plan.mscclpp.execute import Runner
from msccl_py.mscclpp_ir import Plan
from msccl_py.runtime.mscclpp.reference import message_bytes, reduce_op
from msccl_py.runtime.mscclpp.shm_program import Layout, compile_rank, layout
from msccl_py.runtime import process_group as pg
from msccl_py.runtime import shm_exec
from msccl_py.runtime.shm_report import barrier_wait, plan_wait_report
from msccl_py.runtime import shm_native as xml_native

#: call shapes (plan, size, dtype) a pool keeps compiled; past it, it forgets them all
_MAX_SHAPES = 64


class SharedMachine(Machine):
    """The reference interpreter's :class:`Machine` for one rank, its memory in the arena.

    The Python fallback: signals are the arena's counters (``taken`` counts
    what this rank's waits consumed), packets the arena's payload and flags.
    """

    def __init__(self, plan: Plan, nbytes: int, dtype: np.dtype, lay: Layout, reduce, rt):
        self.rt, self.rank, self.lay = rt, rt.rank, lay
        self.regions = [rt.arena.data_view(r, 0, np.dtype(np.uint8), lay.size)
                        for r in range(plan.nranks)]
        dummies = [np.empty(v["i"][2], dtype) for v in lay.views]
        super().__init__(plan, nbytes, dummies, reduce, track=False)
        self.tbs = [(r, tb) for r, tb in self.tbs if r == self.rank]
        for r, pk in enumerate(lay.packets):
            for buf, (payload, flags) in pk.items():
                n = lay.views[r][buf][2]
                self.pkt[(r, buf)] = [self._at(r, payload, dtype, n),
                                      self._at(r, flags, np.dtype(np.uint8), n).view(bool),
                                      np.full(n, -1, np.int64)]
        self.taken: dict[tuple, int] = {}
        self.last = time.monotonic()
        self.report = lambda: ""

    def _at(self, rank: int, off: int, dtype: np.dtype, n: int) -> np.ndarray:
        return self.regions[rank][off:off + n * dtype.itemsize].view(dtype)

    def _buffers(self, r, sizes, inp, dtype, fill):
        for name, n in self.lay.base_elems[r].items():
            self.base[(r, name)] = self._at(r, self.lay.bases[r][name], dtype, n)
        for buf, (name, off, n) in self.lay.views[r].items():
            self.view[(r, buf)] = ((r, name), off, n)

    def counter(self, key) -> np.ndarray:
        owner, slot = self.lay.slots[key]
        return self._at(owner, self.lay.counters[owner] + slot * 64, np.dtype(np.int64), 1)

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
        return int(self.counter(key)[0]) > self.taken.get(key, 0)

    def take_signal(self, g, key, relaxed):
        self.taken[key] = self.taken.get(key, 0) + 1

    def post_signal(self, g, key, where=""):
        self.counter(key)[0] += 1

    def idle(self) -> bool:
        if self.rt.words[0]:           # another rank failed: say what we wait on, and stop
            self.rt._aborted(self.report)
        if time.monotonic() - self.last > self.rt.timeout:
            return False
        time.sleep(0.0005)
        return True


class SharedRunner(Runner):
    """A :class:`Runner` that notes when its rank last made progress (for the no-progress timeout)."""

    def run(self, g, st):
        super().run(g, st)
        self.m.last = time.monotonic()


class _RankState:
    """What a pool rank keeps between calls: plans, and prepared calls by shape."""

    def __init__(self, rt):
        self.rt = rt
        self.plans: dict[int, Plan] = {}
        self.calls: dict[tuple, tuple] = {}
        self.lib = shm_native.library() if rt.native is not None else None

    def prepare(self, key, tables, plan, nbytes, dtype):
        call = None
        if self.lib is not None and dtype.name in xml_native.DTYPES:   # else the Python loop
            call = shm_native.PlanCall(self.lib, self.rt.native.head, self.rt.world_size, tables,
                                       dtype)
        lay = layout(plan, geometry(plan, nbytes), dtype)
        self.calls[key] = (tables, call, lay)

    def run(self, key, pkey, nbytes, dtype, op, desc):
        tables, call, lay = self.calls[key]
        plan = self.plans[pkey]
        if call is not None:
            self._native(call, plan, lay, tables, op, desc)
        else:
            self._python(plan, lay, tables, nbytes, dtype, op, desc)

    def _native(self, call, plan, lay, tables, op, desc):
        rt = self.rt
        rt.seq += 1                 # the executor enters call seq+1 itself
        rt.desc = desc
        rt.in_call = True

        def report() -> str:
            if call.phase == shm_native.PHASE_ENTER:
                return barrier_wait(p for p, m in enumerate(call.missing.tolist()) if m)
            return plan_wait_report(plan, lay, rt.rank, tables.steps,
                                    call.state[:, 0].tolist(), self._region, taken=call.taken,
                                    sems=call.sems, bars=call.bars,
                                    barrier_slots=tables.barrier_slots)
        try:
            rc = call(op, desc, rt.timeout, shm_exec.SPIN_NS)
            if rc != xml_native.RC_DONE:
                rt._native_failed(rc, report, call.ctl)
        finally:
            rt.in_call = False

    def _region(self, r: int, off: int, dtype: np.dtype, n: int) -> np.ndarray:
        region = self.rt.arena.data_view(r, 0, np.dtype(np.uint8), off + n * dtype.itemsize)
        return region[off:].view(dtype)

    def _python(self, plan, lay, tables, nbytes, dtype, op, desc):
        rt = self.rt
        _clear(rt.arena, tables, dtype)
        m = SharedMachine(plan, nbytes, dtype, lay, reduce_op(op), rt)
        run = SharedRunner(m)

        def report() -> str:
            me = rt.rank
            sems = np.array([m.sem[(me, k)][0] for k in range(len(plan.gpus[me].semaphores))])
            bars = np.zeros(2 * max(len(tables.barrier_slots), 1), np.int64)
            for bid, slot in tables.barrier_slots.items():
                bars[2 * slot] = len(m.barriers.get((me, bid), [[]])[0])
            taken = np.zeros(max(tables.nslots, 1), np.int64)
            for key, (owner, slot) in lay.slots.items():
                if owner == me:
                    taken[slot] = m.taken.get(key, 0)
            return plan_wait_report(plan, lay, me, tables.steps, run.pos, self._region,
                                    taken=taken, sems=sems, bars=bars,
                                    barrier_slots=tables.barrier_slots)
        m.report = report
        rt.enter(desc)
        try:
            rt.barrier()
            m.last = time.monotonic()
            run.loop()
            if run.deadlocks:
                rt._deadlock(report)
        finally:
            rt.leave()


def _clear(arena, tables, dtype: np.dtype) -> None:
    """The Python fallback's version of the native executor's clearing (the same rows)."""
    fill = np.array([tables.fill], np.int64).view(np.uint8)[:dtype.itemsize].view(dtype)[0]
    for off, nbytes, kind in tables.arrays["resets"][:tables.rows["resets"]].tolist():
        if kind:
            np.frombuffer(arena.map, dtype, nbytes // dtype.itemsize, off).fill(fill)
        else:
            np.frombuffer(arena.map, np.uint8, nbytes, off).fill(0)


def _serve(rt, conn) -> str:
    """A pool rank: run plan calls until told to exit."""
    state = _RankState(rt)
    while True:
        msg = conn.recv()
        if msg[0] == "exit":
            return pg.QUIET
        _, pkey, pblob, key, tblob, forget, nbytes, dtype_str, op, timeout, desc = msg
        if forget:                       # the parent forgot its plans and shapes: so do we
            state.calls.clear()
            state.plans.clear()
        if pblob is not None:
            state.plans[pkey] = pickle.loads(pblob)
        dtype = np.dtype(dtype_str)
        if tblob is not None:
            state.prepare(key, pickle.loads(tblob), state.plans[pkey], nbytes, dtype)
        rt.timeout = timeout
        state.run(key, pkey, nbytes, dtype, op, desc)
        conn.send(("ok", None))


class _Pool:
    """``nranks`` rank processes serving plan calls, and the call shapes compiled for them."""

    def __init__(self, nranks: int, data_bytes: int):
        shm_native.library()            # build here, once, not in every rank
        self.group = pg.ProcessGroup(nranks, buffsize=4096, data_bytes=data_bytes)
        self.group.start(_serve)
        self.plans: set[int] = set()
        self.shapes: dict[tuple, tuple] = {}
        self.forget = False
        self.data_bytes = self.group.layout.data_stride

    def regions(self) -> list[int]:
        return [self.group.layout.data(r, 0) for r in range(self.group.world_size)]

    def close(self) -> None:
        self.group.close()


_pools = pg.RankPools(_Pool)


def close() -> None:
    """Stop every pooled rank process (they restart on the next :func:`run_shm`)."""
    _pools.close()


def _pool(nranks: int, nbytes: int) -> _Pool:
    """The pool of ``nranks`` ranks (under the executor mode in force), with data regions of
    at least ``nbytes``."""
    return _pools.pool((nranks, xml_native.mode()), nbytes, nranks)


def _descriptor(nbytes: int, dtype: np.dtype, op: str, pkey: int) -> tuple[int, ...]:
    """The call as the ranks check it against each other, and as reports name it (the XML
    runtime's ``run(count=..., dtype=..., op=..., program#...)``)."""
    return (shm_exec.COLLECTIVES.index("run"), nbytes // dtype.itemsize,
            shm_exec.DTYPES.index(dtype.name), shm_exec.OPS.index(op), 0, pkey, 0)


def run_shm(plan: Plan, inputs: list[np.ndarray], op: str = "sum",
            timeout: float | None = None) -> list[np.ndarray]:
    """Each rank's output after running ``plan`` once with one process per rank."""
    nbytes = message_bytes(plan, inputs)
    reduce_op(op)
    arrays = [np.ascontiguousarray(x).reshape(-1) for x in inputs]
    dtype = arrays[0].dtype
    if dtype.name not in shm_exec.DTYPES:
        raise MscclRuntimeError(f"dtype {dtype} is not one the shm runtime runs; use one of "
                                f"{', '.join(shm_exec.DTYPES)}")
    for r, x in enumerate(arrays):
        if x.dtype != dtype:
            raise MscclRuntimeError(f"rank {r}: input dtype {x.dtype} differs from rank 0's {dtype}")
    geo = geometry(plan, nbytes)
    try:
        lay = layout(plan, geo, dtype)
    except PlanInvalid as exc:
        raise MscclRuntimeError(f"invalid: {exc}") from None
    for r, x in enumerate(arrays):
        if x.size != lay.views[r]["i"][2]:
            raise MscclRuntimeError(f"invalid: rank {r} input has {x.size} elements, the plan "
                                    f"needs {lay.views[r]['i'][2]}")
    pool = _pool(plan.nranks, lay.size)
    blob, pkey = pg.plan_key(plan)
    key = (pkey, nbytes, dtype.str)
    shape = pool.shapes.get(key)
    fresh = shape is None
    if fresh:
        try:
            tables = [compile_rank(plan, lay, r, pool.regions()) for r in range(plan.nranks)]
        except PlanInvalid as exc:
            raise MscclRuntimeError(f"invalid: {exc}") from None
        if len(pool.shapes) >= _MAX_SHAPES:
            pool.shapes.clear()
            pool.plans.clear()
            pool.forget = True
        shape = pool.shapes[key] = (lay, [pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL)
                                          for t in tables])
    lay, tblobs = shape
    group = pool.group
    itemsize = dtype.itemsize
    views = [group.arena.data_view(r, 0, dtype, lay.size // itemsize) for r in range(plan.nranks)]
    for r, x in enumerate(arrays):
        start = lay.data(r, "i", 0) // itemsize
        np.copyto(views[r][start:start + x.size], x)
    send_plan = None if pkey in pool.plans else blob
    desc = _descriptor(nbytes, dtype, op, pkey)
    wait = float(timeout or min(pg.DEFAULT_TIMEOUT, 10.0))
    for r in range(plan.nranks):
        group.send(r, ("run", pkey, send_plan, key, tblobs[r] if fresh else None, pool.forget,
                       nbytes, dtype.str, op, wait, desc))
    pool.forget = False
    pg.wait_or_drop(group, pool, _pools)
    pool.plans.add(pkey)
    outs = []
    for r in range(plan.nranks):
        start = lay.data(r, "o", 0) // itemsize
        outs.append(views[r][start:start + lay.views[r]["o"][2]].copy())
    return outs
