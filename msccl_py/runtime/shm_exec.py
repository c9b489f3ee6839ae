"""The per-rank executor of the shm runtime: cooperative threadblocks over shared FIFOs.

Inside a rank process every threadblock is a small state machine (iteration,
step, transfer). One thread runs them in turn; each runs until it must wait
(for data from its receive peer, for room in its send FIFO, for a local
dependency flag, or for a peer to enter the call). When none can move, the
process yields the CPU for a few passes (with more ranks than cores only when
transfers are small: a Python pass is slow enough to take the core its peer
needs; the native loop always polls for up to 0.2 ms) and then sleeps on its
own semaphore, so eight ranks on two cores do not burn CPU. Before sleeping
it publishes a mask of the peers it waits on; a peer that advances a counter
posts the semaphore only when its bit is in that mask. Both sides put a
fence (a lock round trip) between their store and the other's load, so no
wake-up is lost and busy ranks pay no system call.

FIFOs follow MSCCL's geometry (:mod:`msccl_py.plan.geometry`): a
connection holds ``fifo_transfers`` transfers, each one NCCL primitive's worth
of data; counters are monotone for the life of the group. Data moves with
one ``np.copyto`` or ufunc call per transfer, straight between the rank's
buffers and the FIFO pages. Dependency flags live in the process (all of a
rank's threadblocks share it), publishing ``iteration * M + step``.

The same loop exists in compiled code (:mod:`.shm_native`, built with g++ on
first use): when it is available, :meth:`RankRuntime.execute` and
:meth:`RankRuntime.barrier` run there and come back only to raise, with the
same reports; this module's loop is the fallback
(``MSCCL_PY_SHM_EXECUTOR=python`` forces it) and the specification.

Every call starts by publishing a descriptor (collective, size, dtype, op,
root, program) in the rank's slot; before the first transfer with a peer the
executor compares the peer's descriptor for the same call, so mismatched
calls fail on both sides instead of exchanging wrong data. Failures set the
group's abort record and wake everyone; each rank then writes what its
threadblocks were waiting on into its report area for the parent to collect.

>>> COLLECTIVES.index("allreduce") >= 0
True
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import numpy as np

from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.runtime import shm_arena as A
from msccl_py.runtime import shm_native
from msccl_py.plan.geometry import call_geometry
from msccl_py.plan.tables import (
    LOCAL_DST,
    LOCAL_SRC,
    OP_COPY,
    OP_NAMES,
    OP_RCS,
    OP_RECV,
    OP_REDUCE,
    OP_RRCS,
    OP_RRS,
    OP_SEND,
)
from msccl_py.runtime.shm_program import RankProgram

COLLECTIVES = ("barrier", "allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast",
               "reduce", "gather", "scatter", "custom", "run")
DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8", "int8", "int16",
          "uint16", "uint32", "uint64", "bfloat16")
OPS = ("sum", "prod", "max", "min", "avg")
UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
          "avg": np.add}

#: passes of the Python loop with sched_yield before a rank sleeps on its semaphore. A
#: pass walks every threadblock in Python, so with more ranks than cores only short
#: transfers (at most SPIN_BYTES) are awaited so, or the spinner would take the core its
#: peer needs; with a core per rank every wait polls first (a futex wake-up costs tens of
#: µs, as much as moving a 256 KiB transfer)
SPIN = 64
SPIN_BYTES = 1 << 16
#: how long the native executor polls, yielding the CPU between looks, before it sleeps:
#: always, as a look costs little and sched_yield runs a rank that shares the core (1 MiB
#: allreduce on 8 ranks on 2 cores: 2.2-3.2 ms against 4.5-7.5 ms sleeping at once)
SPIN_NS = 200_000
#: calls whose buffers total at most this many bytes keep their operand views cached
VIEW_CACHE_BYTES = 1 << 20
#: longest single sleep; also how often a sleeping rank checks the clock and its parent
WAIT_SLICE = 0.1


#: what a blocked threadblock waits for (``_Tb.wait``)
W_NONE, W_DEP, W_ENTER_RECV, W_ENTER_SEND, W_RECV, W_SEND = range(6)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def bit(rank: int) -> int:
    """The bit of ``rank`` in a sleep mask (ranks past 62 share the last bit)."""
    return 1 << min(rank, 62)


def describe(desc: tuple[int, ...]) -> str:
    """Human text of a call descriptor ``(collective, count, dtype, op, root, program, _)``."""
    coll, count, dtype, op, root, prog = desc[:6]
    name = COLLECTIVES[coll] if 0 <= coll < len(COLLECTIVES) else f"collective#{coll}"
    if name == "barrier":
        return "barrier()"
    parts = [f"count={count}", f"dtype={DTYPES[dtype] if 0 <= dtype < len(DTYPES) else dtype}"]
    if name in ("allreduce", "reduce_scatter", "reduce", "run"):
        parts.append(f"op={OPS[op] if 0 <= op < len(OPS) else op}")
    if name in ("broadcast", "reduce", "gather", "scatter"):
        parts.append(f"root={root}")
    parts.append(f"program#{prog:x}")
    return f"{name}({', '.join(parts)})"


class _Tb:
    """Mutable per-call state of one threadblock."""

    __slots__ = ("fifo_views", "idx", "it", "ln", "lo", "nsteps", "prog", "r_ok", "rfifo",
                 "rhead", "rhead_w", "rpeer", "rtail_w", "s_ok", "sfifo", "shead_w", "si",
                 "speer", "stail", "stail_w", "ti", "views", "wait", "wdep")


class RankRuntime:
    """What one rank process holds: the arena, its peers' doorbells, the abort protocol."""

    def __init__(self, arena: A.Arena, rank: int, world_size: int, sems: list, lock,
                 timeout: float, parent_pid: int):
        self.arena = arena
        self.layout = arena.layout
        self.words = arena.words
        self.rank = rank
        self.world_size = world_size
        self.sems = sems
        self.posts = [s.release for s in sems]
        self.sem = sems[rank]
        self.bit = bit(rank)
        self.sleep_words = [self.layout.sleep_word(p) for p in range(world_size)]
        self._peer_sleep_words = [(p, sw) for p, sw in enumerate(self.sleep_words) if p != rank]
        self._fence = threading.Lock()
        self.spin = SPIN
        self._own_cores = world_size <= _usable_cpus()
        lay = self.layout
        self._seq_w = [lay.seq_word(p) for p in range(world_size)]
        self._desc0 = [lay.desc_word(p, 0) for p in range(world_size)]
        self._done_w = [lay.done_word(p) for p in range(world_size)]
        self._templates: dict[tuple, tuple] = {}
        self._view_cache: dict[tuple, tuple] = {}
        self.lock = lock
        self.timeout = float(timeout)
        self.parent_pid = parent_pid
        self.buffsize = self.layout.buffsize
        self.seq = 0
        self.desc: tuple[int, ...] = (0,) * 7
        self.verified = [0] * world_size
        self.in_call = False
        self._scratch: dict[tuple[str, int], np.ndarray] = {}
        self._state: list[_Tb] = []
        self._niter = 0
        self._cap = 0  # FIFO capacity (transfers) of the call in progress
        self.words[self.layout.pid_word(rank)] = os.getpid()
        lib = shm_native.library()
        self.native = shm_native.NativeExecutor(self, lib) if lib is not None else None

    # ----- call descriptors and rendezvous ---------------------------------------------
    def enter(self, desc: tuple[int, ...]) -> int:
        """Start call ``seq+1`` with descriptor ``desc`` (7 ints) and wake every peer."""
        w = self.words
        if w[0]:
            self._aborted(lambda: "")
        self.seq += 1
        seq = self.seq
        if type(desc) is not tuple:
            desc = tuple(int(v) for v in desc)
        self.desc = desc
        base = self._desc0[self.rank] + (seq % A.HIST) * A.DESC_WORDS
        for j in range(7):
            w[base + 1 + j] = desc[j]
        w[base] = seq
        w[self._seq_w[self.rank]] = seq
        self.in_call = True
        fence = self._fence
        fence.acquire()
        fence.release()
        me = self.bit
        for p, sw in self._peer_sleep_words:
            if w[sw] & me:
                self.posts[p]()
        return seq

    def notify(self, peer: int) -> None:
        """Wake ``peer`` if it sleeps waiting on this rank (a fence orders our stores first)."""
        fence = self._fence
        fence.acquire()
        fence.release()
        if self.words[self.sleep_words[peer]] & self.bit:
            self.posts[peer]()

    def leave(self) -> None:
        self.in_call = False

    def peer_ready(self, peer: int) -> bool:
        """True once ``peer`` has entered this call with an equal descriptor."""
        seq = self.seq
        if self.verified[peer] >= seq:
            return True
        w = self.words
        if w[self._seq_w[peer]] < seq:
            if w[self._done_w[peer]] and w[self._seq_w[peer]] < seq:
                self._finished(peer)
            return False
        base = self._desc0[peer] + (seq % A.HIST) * A.DESC_WORDS
        if w[base] == seq:
            theirs = tuple(w[base + 1:base + 8])
            if theirs != self.desc:
                self._mismatch(peer, theirs)
        self.verified[peer] = seq
        return True

    def peer_descriptor_next(self, peer: int) -> tuple[int, ...] | None:
        """``peer``'s descriptor of the next call (the one this rank is about to enter)."""
        w = self.words
        seq = self.seq + 1
        if w[self._seq_w[peer]] < seq:
            if w[self._done_w[peer]] and w[self._seq_w[peer]] < seq:
                msg = (f"mismatched collective calls: rank {self.rank} waits for rank {peer} "
                       f"to start call #{seq} but rank {peer} returned after "
                       f"{w[self._seq_w[peer]]} calls")
                self.abort(A.ABORT_MISMATCH, msg)
                raise MscclRuntimeError(msg)
            return None
        base = self.layout.desc_word(peer, seq)
        if w[base] != seq:
            return None
        return tuple(w[base + 1 + j] for j in range(7))

    def finish(self) -> None:
        """Mark this rank as done (no more calls) and wake every peer that waits on it."""
        w = self.words
        w[self._done_w[self.rank]] = 1
        fence = self._fence
        fence.acquire()
        fence.release()
        for p, sw in enumerate(self.sleep_words):
            if p != self.rank and w[sw] & self.bit:
                self.posts[p]()

    def _finished(self, peer: int) -> None:
        msg = (f"mismatched collective calls: rank {self.rank} entered call #{self.seq} "
               f"{describe(self.desc)} but rank {peer} returned after "
               f"{self.words[self._seq_w[peer]]} calls")
        self.abort(A.ABORT_MISMATCH, msg)
        self.write_report(msg)
        raise MscclRuntimeError(msg)

    def _mismatch(self, peer: int, theirs: tuple[int, ...]) -> None:
        msg = (f"mismatched collective calls at call #{self.seq}: rank {self.rank} called "
               f"{describe(self.desc)} but rank {peer} called {describe(theirs)}")
        self.abort(A.ABORT_MISMATCH, msg)
        self.write_report(msg)
        raise MscclRuntimeError(msg)

    def barrier(self) -> None:
        """Block until every rank has entered this call (descriptors checked)."""
        if self.native is not None:
            self._barrier_native()
            return
        pending = [p for p in range(self.world_size) if p != self.rank]

        def step() -> tuple[bool, bool]:
            moved = False
            while pending and self.peer_ready(pending[-1]):
                pending.pop()
                moved = True
            return not pending, moved

        def report() -> str:
            return "waits in barrier for ranks " + ", ".join(str(p) for p in sorted(pending))

        def mask() -> int:
            m = 0
            for p in pending:
                m |= bit(p)
            return m

        self.spin = SPIN
        self.drive(step, report, mask)

    def _barrier_native(self) -> None:
        rc, missing = self.native.barrier(SPIN_NS)
        if rc == shm_native.RC_DONE:
            return
        self._native_failed(rc, lambda: "waits in barrier for ranks " +
                            ", ".join(str(p) for p in missing), self.native.bctl)

    def _native_failed(self, rc: int, report: Callable[[], str], ctl: np.ndarray) -> None:
        """Raise what the Python loop raises when the native one stops with ``rc``."""
        if rc == shm_native.RC_ABORT:
            self._aborted(report)
        if rc == shm_native.RC_DEADLOCK:
            self._deadlock(report)
        if rc == shm_native.RC_PARENT:
            raise MscclRuntimeError(f"rank {self.rank}: the launching process exited")
        if rc == shm_native.RC_PEER:
            peer = int(ctl[shm_native.C_OUT_PEER])
            self.peer_ready(peer)       # raises the mismatch the native code saw
            raise MscclRuntimeError(f"rank {self.rank}: the native executor stopped on rank "
                                    f"{peer}'s descriptor, which now matches")
        raise MscclRuntimeError(f"rank {self.rank}: the native executor returned code {rc}")

    # ----- blocking -----------------------------------------------------------------------
    def drive(self, step: Callable[[], tuple[bool, bool]], report: Callable[[], str],
              mask: Callable[[], int]) -> None:
        """Call ``step`` until it reports done; wait cheaply when it makes no progress.

        A blocked rank first yields the CPU up to ``self.spin`` times between
        passes. Then it publishes ``mask()`` (the peers whose progress it waits
        for), so that only those post its semaphore, and sleeps. Raises
        :class:`MscclDeadlockError` after ``timeout`` seconds without progress
        and an abort error when another rank failed.
        """
        w = self.words
        sem = self.sem
        sleep_w = self.sleep_words[self.rank]
        spin = self.spin
        fence = self._fence
        yield_ = os.sched_yield
        budget = spin
        published = -1
        blocked_since = 0.0
        try:
            while True:
                done, moved = step()
                if done:
                    return
                if moved:
                    if published >= 0:
                        w[sleep_w] = 0
                        published = -1
                    budget = spin
                    continue
                if w[0]:
                    self._aborted(report)
                if budget > 0:
                    budget -= 1
                    yield_()
                    continue
                m = mask()
                if m != published:
                    # first sleep, or what we wait on changed (data arrived but the
                    # send FIFO is full): publish, fence, look once more, then sleep
                    if published < 0:
                        blocked_since = time.monotonic()
                    published = w[sleep_w] = m
                    fence.acquire()
                    fence.release()
                    while sem.acquire(False):
                        pass
                    continue
                sem.acquire(True, WAIT_SLICE)
                if time.monotonic() - blocked_since > self.timeout:
                    self._deadlock(report)
                if os.getppid() != self.parent_pid:
                    raise MscclRuntimeError(f"rank {self.rank}: the launching process exited")
        finally:
            w[sleep_w] = 0

    def check_abort(self) -> None:
        if self.words[0]:
            self._aborted(lambda: "")

    def abort(self, code: int, message: str) -> bool:
        """Record the group's first failure and wake everyone; True if this was the first."""
        w = self.words
        first = False
        got = self.lock.acquire(True, 2.0)
        try:
            if not w[0]:
                n = self.arena.write_text(self.layout.message_offset, A.MSG_BYTES, message)
                w[2] = n
                w[1] = self.rank
                w[0] = code
                first = True
        finally:
            if got:
                self.lock.release()
        for p in range(self.world_size):
            if p != self.rank:
                self.posts[p]()
        return first

    def abort_message(self) -> tuple[int, int, str]:
        w = self.words
        return int(w[0]), int(w[1]), self.arena.read_text(self.layout.message_offset, int(w[2]))

    def write_report(self, text: str) -> None:
        n = self.arena.write_text(self.layout.report_offset(self.rank), A.REPORT_BYTES, text)
        self.words[self.layout.report_len_word(self.rank)] = n

    def _aborted(self, report: Callable[[], str]) -> None:
        code, origin, msg = self.abort_message()
        if self.in_call:
            self.write_report(f"in call #{self.seq} {describe(self.desc)}: {report()}")
        self.in_call = False
        cls = MscclDeadlockError if code == A.ABORT_DEADLOCK else MscclRuntimeError
        raise cls(f"rank {self.rank}: call #{self.seq} aborted because rank {origin} failed: "
                  f"{msg}")

    def _deadlock(self, report: Callable[[], str]) -> None:
        text = report()
        summary = (f"no progress for {self.timeout:g} s in call #{self.seq} "
                   f"{describe(self.desc)}; first noticed by rank {self.rank}")
        self.write_report(f"in call #{self.seq} {describe(self.desc)}: {text}")
        self.in_call = False
        self.abort(A.ABORT_DEADLOCK, summary)
        raise MscclDeadlockError(f"rank {self.rank}: {summary}:\n{text}")

    # ----- execution ----------------------------------------------------------------------
    def scratch(self, dtype: np.dtype, count: int) -> np.ndarray:
        """A private scratch buffer of at least ``count`` elements, reused across calls."""
        key = (dtype.str, count)
        buf = self._scratch.get(key)
        if buf is None:
            if len(self._scratch) > 8:
                self._scratch.clear()
            buf = self._scratch[key] = np.empty(count, dtype=dtype)
        return buf

    def _fifo_wait(self, st: "_Tb", recv: bool, send: bool) -> int:
        """What keeps ``st``'s next transfer from moving (``W_NONE``: nothing); both loops
        of :meth:`execute` ask this before every transfer."""
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
            if st.stail - w[st.shead_w] >= self._cap:
                return W_SEND
        return W_NONE

    def _transferred(self, st: "_Tb", recv: bool, send: bool) -> None:
        """Publish one transfer of ``st``: advance its FIFO ends, then wake a sleeping peer."""
        w = self.words
        if recv:
            st.rhead += 1
            w[st.rhead_w] = st.rhead
        if send:
            st.stail += 1
            w[st.stail_w] = st.stail
        self._fence.acquire()
        self._fence.release()
        if recv and w[self.sleep_words[st.rpeer]] & self.bit:
            self.posts[st.rpeer]()
        if send and w[self.sleep_words[st.speer]] & self.bit:
            self.posts[st.speer]()

    def execute(self, prog: RankProgram, bufs: list, chunk_elems: int, dtype: np.dtype,
                op: str) -> None:
        """Run this rank's threadblocks of ``prog`` once (call :meth:`enter` first).

        ``bufs`` are the input, output and scratch arrays (1-D, ``dtype``; any
        may alias); ``chunk_elems`` is S.
        """
        S = chunk_elems
        template = self._template(prog, S, dtype)
        niter, L, mac, cap, statics = template
        if niter == 0 or not prog.tbs:
            return
        if self.native is not None and self._execute_native(prog, template, bufs, S, dtype, op):
            return
        ufunc = UFUNCS[op]
        copyto = np.copyto
        w = self.words
        M = prog.max_steps
        flags = [-1] * len(prog.tbs)
        ln0 = min(L, S)
        states = statics
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
        self._state, self._niter, self._cap = states, niter, cap
        fifo_wait, transferred = self._fifo_wait, self._transferred

        def advance(st: _Tb) -> bool:
            moved = False
            steps = st.prog.steps
            while True:
                op_, sb, so, db, do, c, deps, hasdep, recv, send, acc = steps[st.si]
                if st.ti == 0 and deps:
                    need = st.it * M
                    for dt, ds in deps:
                        if flags[dt] < need + ds:
                            st.wait = W_DEP
                            st.wdep = (dt, ds)
                            return moved
                lo, ln = st.lo, st.ln
                ntr = -(-c // mac) or 1
                if op_ >= OP_COPY:
                    src, dst, base = bufs[sb], bufs[db], bufs[acc]
                    for t in range(ntr):
                        k0 = t * mac
                        k = min(c - k0, mac)
                        n = (k - 1) * S + ln if k > 0 else 0
                        s0 = (so + k0) * S + lo
                        d0 = (do + k0) * S + lo
                        if op_ == OP_COPY:
                            copyto(dst[d0:d0 + n], src[s0:s0 + n])
                        else:
                            ufunc(base[d0:d0 + n], src[s0:s0 + n], out=dst[d0:d0 + n])
                else:
                    while st.ti < ntr:
                        kind = fifo_wait(st, recv, send)
                        if kind != W_NONE:
                            st.wait = kind
                            return moved
                        k0 = st.ti * mac
                        k = min(c - k0, mac)
                        n = (k - 1) * S + ln if k > 0 else 0
                        if recv:
                            rs = st.rfifo[st.rhead % cap, :n]
                        if send:
                            ss = st.sfifo[st.stail % cap, :n]
                        if op_ == OP_SEND:
                            s0 = (so + k0) * S + lo
                            copyto(ss, bufs[sb][s0:s0 + n])
                        elif op_ == OP_RECV:
                            d0 = (do + k0) * S + lo
                            copyto(bufs[db][d0:d0 + n], rs)
                        elif op_ == OP_RRS:
                            s0 = (so + k0) * S + lo
                            ufunc(rs, bufs[sb][s0:s0 + n], out=ss)
                        elif op_ == OP_RCS:
                            d0 = (do + k0) * S + lo
                            copyto(bufs[db][d0:d0 + n], rs)
                            copyto(ss, rs)
                        else:
                            s0 = (so + k0) * S + lo
                            d0 = (do + k0) * S + lo
                            dv = bufs[db][d0:d0 + n]
                            ufunc(rs, bufs[sb][s0:s0 + n], out=dv)
                            if op_ == OP_RRCS:
                                copyto(ss, dv)
                        transferred(st, recv, send)
                        st.ti += 1
                        moved = True
                st.ti = 0
                if hasdep:
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

        self.spin = SPIN if self._spins(L, S, dtype) else 0
        self.drive(step, self.wait_report, mask)
        self._state = []

    def _spins(self, L: int, S: int, dtype: np.dtype) -> bool:
        """Whether the Python loop's waits in a call of ``L``-element slices poll first."""
        return self._own_cores or min(L, S) * dtype.itemsize <= SPIN_BYTES

    def bind(self, prog: RankProgram, bufs: list, chunk_elems: int, dtype: np.dtype,
             op: str, desc: tuple[int, ...],
             fresh_output: bool = False) -> Callable[[], np.ndarray]:
        """A whole call (:meth:`enter` ``desc``, :meth:`execute`, :meth:`leave`) of these
        arguments as a function of none, for repeated calls; it returns the output.

        With the native executor everything but the call itself is done here
        once, and the executor enters the call too, so a repeat costs one
        ctypes call. The caller keeps ``bufs`` alive and unchanged while it
        uses the function. ``fresh_output``: every call writes a new array
        shaped like ``bufs[1]`` (which the first call uses) and returns it.
        """
        S = chunk_elems
        desc = tuple(int(v) for v in desc)
        template = self._template(prog, S, dtype)
        niter, L, _, _, statics = template
        packed = None
        if self.native is not None and niter and prog.tbs:
            packed = self.native.prepare(prog, S, dtype, template, statics)
        first = [bufs[1]]

        def output() -> np.ndarray:
            if first:
                return first.pop()
            return np.empty(bufs[1].shape, dtype=bufs[1].dtype)

        if packed is None or not all(b.flags.c_contiguous for b in bufs):
            def python_call() -> np.ndarray:
                out = output() if fresh_output else bufs[1]
                self.enter(desc)
                try:
                    self.execute(prog, [bufs[0], out, bufs[2]], S, dtype, op)
                finally:
                    self.leave()
                return out
            return python_call
        run, state, ctl = self.native.bind(packed, bufs, op, SPIN_NS, desc)

        def call() -> np.ndarray:
            out = bufs[1]
            if fresh_output:
                out = output()
                ctl[shm_native.C_BUF1] = out.ctypes.data
            # the executor publishes call seq+1 itself (RankRuntime.enter's words)
            self.seq += 1
            self.desc = desc
            self.in_call = True
            try:
                rc = run()
                if rc:
                    self._native_stopped(rc, template, state, ctl)
            finally:
                self.in_call = False
            return out
        return call

    def _execute_native(self, prog: RankProgram, template: tuple, bufs: list, S: int,
                        dtype: np.dtype, op: str) -> bool:
        """:meth:`execute` in compiled code (False: it cannot take this call); failures end
        the way the Python loop's do."""
        niter, L, _, cap, statics = template
        native = self.native
        packed = native.prepare(prog, S, dtype, template, statics)
        if packed is None:
            return False
        rc, state = native.execute(packed, bufs, op, SPIN_NS)
        if rc == shm_native.RC_DONE:
            return True
        if rc == shm_native.RC_UNFIT:
            return False
        self._native_stopped(rc, template, state, packed[0])
        return True

    def _native_stopped(self, rc: int, template: tuple, state: np.ndarray,
                        ctl: np.ndarray) -> None:
        """Raise for a native call that ended with ``rc``, with the Python loop's report."""
        niter, _, _, cap, statics = template
        for st, row in zip(statics, state.tolist()):
            st.it, st.si, st.ti, st.wait, dt, ds, st.stail, st.rhead = row
            st.wdep = (dt, ds)
        self._state, self._niter, self._cap = statics, niter, cap
        self._native_failed(rc, self.wait_report, ctl)

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
            for (op, sb, so, db, do, c, _, _, recv, send, acc) in st.prog.steps:
                step_views, step_fifo = [], []
                for t in range(-(-c // mac) or 1):
                    k0 = t * mac
                    k = min(c - k0, mac)
                    n = k * S if k > 0 else 0
                    s0, d0 = (so + k0) * S, (do + k0) * S
                    src = bufs[sb][s0:s0 + n] if LOCAL_SRC[op] else None
                    dst = bufs[db][d0:d0 + n] if LOCAL_DST[op] else None
                    base = bufs[acc][d0:d0 + n] if op == OP_REDUCE else None
                    step_views.append((src, dst, base))
                    step_fifo.append((tuple(st.rfifo[i, :n] for i in range(cap)) if recv else (),
                                      tuple(st.sfifo[i, :n] for i in range(cap)) if send else ()))
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
        copyto = np.copyto
        fifo_wait, transferred = self._fifo_wait, self._transferred

        def advance(st: _Tb) -> bool:
            moved = False
            steps = st.prog.steps
            while True:
                si = st.si
                op_, _, _, _, _, _, deps, hasdep, recv, send, _ = steps[si]
                if st.ti == 0 and deps:
                    for dt, ds in deps:
                        if flags[dt] < ds:
                            st.wait = W_DEP
                            st.wdep = (dt, ds)
                            return moved
                views = st.views[si]
                if op_ >= OP_COPY:
                    for src, dst, base in views:
                        if op_ == OP_COPY:
                            copyto(dst, src)
                        else:
                            ufunc(base, src, out=dst)
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
                        if op_ == OP_SEND:
                            copyto(ssl[st.stail % cap], src)
                        elif op_ == OP_RECV:
                            copyto(dst, rsl[st.rhead % cap])
                        elif op_ == OP_RRS:
                            ufunc(rsl[st.rhead % cap], src, out=ssl[st.stail % cap])
                        elif op_ == OP_RCS:
                            rs = rsl[st.rhead % cap]
                            copyto(dst, rs)
                            copyto(ssl[st.stail % cap], rs)
                        else:
                            ufunc(rsl[st.rhead % cap], src, out=dst)
                            if op_ == OP_RRCS:
                                copyto(ssl[st.stail % cap], dst)
                        transferred(st, recv, send)
                        st.ti += 1
                        moved = True
                st.ti = 0
                if hasdep:
                    flags[st.idx] = si
                moved = True
                st.si = si + 1
                if st.si == st.nsteps:
                    st.it = 1
                    return True

        return advance

    def _template(self, prog: RankProgram, S: int, dtype: np.dtype) -> tuple:
        """Geometry and the threadblock state objects of one call shape (cached, reused)."""
        key = (id(prog), S, dtype.str)
        hit = self._templates.get(key)
        if hit is not None and hit[0] is prog:
            return hit[1]
        cg = call_geometry(prog.protocol, prog.nchunksperloop, S, dtype.itemsize,
                           buffsize=self.buffsize)
        cap = cg.fifo_transfers
        lay, arena = self.layout, self.arena
        statics = []
        for idx, tb in enumerate(prog.tbs):
            sc, rc = tb.send_conn, tb.recv_conn
            st = _Tb()
            st.prog, st.idx, st.nsteps = tb, idx, len(tb.steps)
            st.speer, st.rpeer = tb.send_peer, tb.recv_peer
            st.stail_w = lay.tail_word(sc) if sc >= 0 else -1
            st.shead_w = lay.head_word(sc) if sc >= 0 else -1
            st.sfifo = arena.fifo_entries(sc, dtype, cap) if sc >= 0 else None
            st.rtail_w = lay.tail_word(rc) if rc >= 0 else -1
            st.rhead_w = lay.head_word(rc) if rc >= 0 else -1
            st.rfifo = arena.fifo_entries(rc, dtype, cap) if rc >= 0 else None
            statics.append(st)
        value = (cg.iterations, cg.iter_elems, cg.max_allowed_count, cap, statics)
        if len(self._templates) > 256:
            self._templates.clear()
        self._templates[key] = (prog, value)
        return value

    def wait_report(self) -> str:
        """What each unfinished threadblock of the current call waits on."""
        lines = []
        w = self.words
        for st in self._state:
            tb = st.prog
            head = (f"tb {tb.id} (channel {tb.channel}, send {tb.send_peer}, recv {tb.recv_peer})")
            if st.it >= self._niter:
                continue
            op_, c = tb.steps[st.si][0], tb.steps[st.si][5]
            where = (f"{head} iteration {st.it + 1}/{self._niter} step {st.si} "
                     f"({OP_NAMES[op_]}, count {c})")
            kind = st.wait
            if kind == W_DEP:
                dt, ds = st.wdep
                what = (f"waits for tb {self._state[dt].prog.id} to finish step {ds} of "
                        f"iteration {st.it + 1}")
            elif kind in (W_ENTER_RECV, W_ENTER_SEND):
                peer = st.rpeer if kind == W_ENTER_RECV else st.speer
                what = (f"waits for rank {peer} to enter call #{self.seq} (it is at call "
                        f"#{w[self.layout.seq_word(peer)]})")
            elif kind == W_RECV:
                what = (f"waits for data from rank {st.rpeer} on channel {tb.channel} "
                        f"(transfers consumed {st.rhead}, posted by the sender "
                        f"{w[st.rtail_w]})")
            elif kind == W_SEND:
                what = (f"waits for FIFO space towards rank {st.speer} on channel {tb.channel} "
                        f"(posted {st.stail}, receiver consumed {w[st.shead_w]})")
            else:
                what = "is runnable"
            lines.append(f"{where} {what}")
        return "\n".join(lines) if lines else "all threadblocks finished"
