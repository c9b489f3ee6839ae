"""The shm runtime's Python executor: the specification of a rank's loop, and the fallback.

Inside a rank every threadblock is a small state machine (iteration, step,
transfer) in a :class:`~.shm_threadblocks.TbState`. One thread runs them in
turn; each runs until it must wait (for data from its receive peer, for room
in its send FIFO, for a local dependency flag, or for a peer to enter the
call), and :meth:`RankRuntime.drive <msccl_py.runtime.shm_exec.RankRuntime.drive>`
waits cheaply when none can move. The compiled executor (:mod:`.shm_native`)
runs the same machine; this one runs when it cannot (no compiler, a dtype it
lacks, ``MSCCL_PY_SHM_EXECUTOR=python``).

Data moves with one ``np.copyto`` or ufunc call per operand per transfer,
straight between the rank's buffers and the FIFO pages. What each op does
with its operands is written once, in :data:`msccl_py.plan.moves.MOVES`; both
loops (the general one, and the one for calls of a single pipeline iteration,
which slices its operands once per call instead of once per transfer)
dispatch through it.
Dependency flags live in the process (all of a rank's threadblocks share
them), publishing ``iteration * M + step``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from msccl_py.plan.contract import REDUCTIONS as UFUNCS
from msccl_py.plan.moves import MOVES
from msccl_py.plan.tables import LOCAL_DST, LOCAL_SRC, OP_REDUCE
from msccl_py.runtime.bfloat16 import BF16, Bf16Ufunc
from msccl_py.runtime.shm_control import bit
from msccl_py.runtime.shm_program import RankProgram
from msccl_py.runtime.shm_threadblocks import (W_DEP, W_ENTER_RECV, W_ENTER_SEND, W_NONE,
                                               W_RECV, W_SEND, CallTemplate, TbState)

#: passes of the Python loop with sched_yield before a rank sleeps on its semaphore. A
#: pass walks every threadblock in Python, so with more ranks than cores only short
#: transfers (at most SPIN_BYTES) are awaited so, or the spinner would take the core its
#: peer needs; with a core per rank every wait polls first (a futex wake-up costs tens of
#: µs, as much as moving a 256 KiB transfer)
SPIN = 64
SPIN_BYTES = 1 << 16
#: calls whose buffers total at most this many bytes keep their operand views cached
VIEW_CACHE_BYTES = 1 << 20


#: which operands an op reads or writes in the rank's buffers (the others are None)
_SRC = tuple(bool(v) for v in LOCAL_SRC)
_DST = tuple(bool(v) for v in LOCAL_DST)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class PythonExecutor:
    """One rank's Python executor; ``rt`` is its :class:`~.shm_exec.RankRuntime`."""

    def __init__(self, rt):
        self.rt = rt
        self.words = rt.words
        self.peer_ready = rt.peer_ready
        self.fence_acquire, self.fence_release = rt.fence.acquire, rt.fence.release
        self.posts = rt.posts
        self.bit = rt.bit
        self.own_cores = rt.world_size <= _usable_cpus()
        self.cap = 0  # FIFO capacity (transfers) of the call in progress
        self._view_cache: dict[tuple, tuple] = {}

    def spins(self, L: int, S: int, dtype: np.dtype) -> bool:
        """Whether the Python loop's waits in a call of ``L``-element slices poll first."""
        return self.own_cores or min(L, S) * dtype.itemsize <= SPIN_BYTES

    def fifo_wait(self, st: TbState, recv: bool, send: bool) -> int:
        """What keeps ``st``'s next transfer from moving (``W_NONE``: nothing); both loops
        ask this before every transfer."""
        w = self.words
        if recv:
            if not st.r_ok:
                if not self.peer_ready(st.rpeer):
                    return W_ENTER_RECV
                st.r_ok = True
            if w[st.rtail_w] <= st.rhead:
                return W_RECV
        if send:
            if not st.s_ok:
                if not self.peer_ready(st.speer):
                    return W_ENTER_SEND
                st.s_ok = True
            if st.stail - w[st.shead_w] >= self.cap:
                return W_SEND
        return W_NONE

    def transferred(self, st: TbState, recv: bool, send: bool) -> None:
        """Publish one transfer of ``st``: advance its FIFO ends, then wake a sleeping peer."""
        w = self.words
        if recv:
            st.rhead += 1
            w[st.rhead_w] = st.rhead
        if send:
            st.stail += 1
            w[st.stail_w] = st.stail
        self.fence_acquire()
        self.fence_release()
        if recv and w[st.rsleep_w] & self.bit:
            self.posts[st.rpeer]()
        if send and w[st.ssleep_w] & self.bit:
            self.posts[st.speer]()

    def execute(self, prog: RankProgram, call: CallTemplate, bufs: list, S: int,
                dtype: np.dtype, op: str) -> None:
        """Run this rank's threadblocks of ``prog`` once, in the shape ``call`` (entered)."""
        rt = self.rt
        niter, L, mac, cap = call.iterations, call.iter_elems, call.max_count, call.fifo_transfers
        ufunc = UFUNCS[op] if dtype != BF16 else Bf16Ufunc(UFUNCS[op])
        moves = MOVES
        w = self.words
        M = prog.max_steps
        flags = [-1] * len(prog.tbs)
        ln0 = min(L, S)
        states = call.tbs
        active = []
        for st in states:
            st.it = st.si = st.ti = st.lo = 0
            st.ln = ln0
            st.s_ok = st.r_ok = False
            st.wait = W_NONE
            if st.stail_w >= 0:
                st.stail = w[st.stail_w]
            if st.rhead_w >= 0:
                st.rhead = w[st.rhead_w]
            if st.nsteps:
                active.append(st)
            else:
                st.it = niter
        rt.call = call
        self.cap = cap
        fifo_wait, transferred = self.fifo_wait, self.transferred

        def advance(st: TbState) -> bool:
            moved = False
            steps = st.prog.steps
            while True:
                step = steps[st.si]
                if st.ti == 0 and step.deps:
                    need = st.it * M
                    for dt, ds in step.deps:
                        if flags[dt] < need + ds:
                            st.wait = W_DEP
                            st.wdep = (dt, ds)
                            return moved
                lo, ln = st.lo, st.ln
                c, so, do, op_ = step.count, step.src_off, step.dst_off, step.op
                move = moves[op_]
                src = bufs[step.src_buf] if _SRC[op_] else None
                dst = bufs[step.dst_buf] if _DST[op_] else None
                ntr = -(-c // mac) or 1
                recv, send = step.recv, step.send
                if not (recv or send):
                    acc = bufs[step.acc_buf] if op_ == OP_REDUCE else None
                    for t in range(ntr):
                        k0 = t * mac
                        k = min(c - k0, mac)
                        n = (k - 1) * S + ln if k > 0 else 0
                        s0 = (so + k0) * S + lo
                        d0 = (do + k0) * S + lo
                        move(ufunc, src[s0:s0 + n], dst[d0:d0 + n],
                             acc[d0:d0 + n] if acc is not None else None, None, None)
                else:
                    while st.ti < ntr:
                        kind = fifo_wait(st, recv, send)
                        if kind != W_NONE:
                            st.wait = kind
                            return moved
                        k0 = st.ti * mac
                        k = min(c - k0, mac)
                        n = (k - 1) * S + ln if k > 0 else 0
                        if src is not None:
                            s0 = (so + k0) * S + lo
                            sv = src[s0:s0 + n]
                        else:
                            sv = None
                        if dst is not None:
                            d0 = (do + k0) * S + lo
                            dv = dst[d0:d0 + n]
                        else:
                            dv = None
                        move(ufunc, sv, dv, None,
                             st.rfifo[st.rhead % cap, :n] if recv else None,
                             st.sfifo[st.stail % cap, :n] if send else None)
                        transferred(st, recv, send)
                        st.ti += 1
                        moved = True
                st.ti = 0
                if step.has_dep:
                    flags[st.idx] = st.it * M + st.si
                moved = True
                st.si += 1
                if st.si == st.nsteps:
                    st.si = 0
                    st.it += 1
                    if st.it >= niter:
                        return True
                    st.lo = st.it * L
                    st.ln = min(L, S - st.lo)

        if niter == 1:
            advance = self._one_iteration(prog, S, dtype, bufs, states, flags, ufunc, cap, mac)

        def step() -> tuple[bool, bool]:
            moved = False
            for st in active:
                # skip, cheaply, a threadblock whose reason to wait still holds
                kind = st.wait
                if kind == W_RECV:
                    if w[st.rtail_w] <= st.rhead:
                        continue
                elif kind == W_SEND:
                    if st.stail - w[st.shead_w] >= cap:
                        continue
                elif kind == W_DEP:
                    dt, ds = st.wdep
                    if flags[dt] < st.it * M + ds:
                        continue
                st.wait = W_NONE
                if advance(st):
                    moved = True
            if moved:
                active[:] = [st for st in active if st.it < niter]
            return not active, moved

        def mask() -> int:
            m = 0
            for st in active:
                kind = st.wait
                if kind == W_RECV or kind == W_ENTER_RECV:
                    m |= bit(st.rpeer)
                elif kind == W_SEND or kind == W_ENTER_SEND:
                    m |= bit(st.speer)
            return m

        rt.spin = SPIN if self.spins(L, S, dtype) else 0
        rt.drive(step, rt.wait_report, mask)
        rt.call = None

    def _views(self, prog: RankProgram, S: int, dtype: np.dtype, bufs: list, states: list,
               cap: int, mac: int) -> None:
        """Set ``st.views``/``st.fifo_views``: every transfer's operands of a one-iteration call.

        Small calls cache them by the buffers' identity (the cache holds the
        buffers, so ids stay unique), so repeated calls on the same arrays
        create no NumPy views.
        """
        key = (id(prog), S, dtype.str, id(bufs[0]), id(bufs[1]), id(bufs[2]))
        hit = self._view_cache.get(key)
        if hit is not None:
            for st, (views, fifo) in zip(states, hit[1]):
                st.views, st.fifo_views = views, fifo
            return
        per_tb = []
        for st in states:
            views, fifo = [], []
            for step in st.prog.steps:
                op, c = step.op, step.count
                step_views, step_fifo = [], []
                for t in range(-(-c // mac) or 1):
                    k0 = t * mac
                    k = min(c - k0, mac)
                    n = k * S if k > 0 else 0
                    s0, d0 = (step.src_off + k0) * S, (step.dst_off + k0) * S
                    src = bufs[step.src_buf][s0:s0 + n] if _SRC[op] else None
                    dst = bufs[step.dst_buf][d0:d0 + n] if _DST[op] else None
                    acc = bufs[step.acc_buf][d0:d0 + n] if op == OP_REDUCE else None
                    step_views.append((src, dst, acc))
                    step_fifo.append(
                        (tuple(st.rfifo[i, :n] for i in range(cap)) if step.recv else (),
                         tuple(st.sfifo[i, :n] for i in range(cap)) if step.send else ()))
                views.append(step_views)
                fifo.append(step_fifo)
            st.views, st.fifo_views = views, fifo
            per_tb.append((views, fifo))
        if sum(b.nbytes for b in bufs) <= VIEW_CACHE_BYTES:
            if len(self._view_cache) >= 8:
                self._view_cache.clear()
            self._view_cache[key] = (list(bufs), per_tb)

    def _one_iteration(self, prog: RankProgram, S: int, dtype: np.dtype, bufs: list,
                       states: list, flags: list, ufunc, cap: int, mac: int) -> Callable:
        """``advance`` for a call of one pipeline iteration, with pre-made operand views.

        Same semantics as the general loop of :meth:`execute`, minus the offset
        arithmetic and slicing per transfer, which dominate small calls.
        """
        self._views(prog, S, dtype, bufs, states, cap, mac)
        moves = MOVES
        fifo_wait, transferred = self.fifo_wait, self.transferred

        def advance(st: TbState) -> bool:
            moved = False
            steps = st.prog.steps
            while True:
                si = st.si
                step = steps[si]
                if st.ti == 0 and step.deps:
                    for dt, ds in step.deps:
                        if flags[dt] < ds:
                            st.wait = W_DEP
                            st.wdep = (dt, ds)
                            return moved
                views = st.views[si]
                move = moves[step.op]
                recv, send = step.recv, step.send
                if not (recv or send):
                    for src, dst, acc in views:
                        move(ufunc, src, dst, acc, None, None)
                else:
                    fifo = st.fifo_views[si]
                    ntr = len(views)
                    while st.ti < ntr:
                        kind = fifo_wait(st, recv, send)
                        if kind != W_NONE:
                            st.wait = kind
                            return moved
                        src, dst, _ = views[st.ti]
                        rsl, ssl = fifo[st.ti]
                        move(ufunc, src, dst, None, rsl[st.rhead % cap] if recv else None,
                             ssl[st.stail % cap] if send else None)
                        transferred(st, recv, send)
                        st.ti += 1
                        moved = True
                st.ti = 0
                if step.has_dep:
                    flags[st.idx] = si
                moved = True
                st.si = si + 1
                if st.si == st.nsteps:
                    st.it = 1
                    return True

        return advance
