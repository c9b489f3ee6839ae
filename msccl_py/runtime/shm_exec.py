"""The per-rank executor of the shm runtime: rendezvous, waiting, failures, and which loop runs.

A rank process holds one :class:`RankRuntime`. Every call starts by
publishing a descriptor (collective, size, dtype, op, root, program) in the
rank's slot of the control words (:mod:`.shm_control`); before the first
transfer with a peer the executor compares the peer's descriptor for the
same call, so mismatched calls fail on both sides instead of exchanging
wrong data. The call itself runs in compiled code (:mod:`.shm_native`,
built with g++ on first use) when it is available, and otherwise in the
Python loop (:mod:`.shm_python`, also the specification); both walk the
same threadblock states (:mod:`.shm_threadblocks`) and fail with the same
reports.

When no threadblock can move, the process yields the CPU for a few passes
and then sleeps on its own semaphore, so eight ranks on two cores do not
burn CPU. Before sleeping it publishes a mask of the peers it waits on; a
peer that advances a counter posts the semaphore only when its bit is in
that mask. Both sides put a fence (a lock round trip) between their store
and the other's load, so no wake-up is lost and busy ranks pay no system
call.

FIFOs follow MSCCL's geometry (:mod:`msccl_py.plan.geometry`): a
connection holds ``fifo_transfers`` transfers, each one NCCL primitive's
worth of data; counters are monotone for the life of the group. Failures set
the group's abort record and wake everyone; each rank then writes what its
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
from msccl_py.transport import shm_arena as A
from msccl_py.runtime import shm_native
from msccl_py.runtime.shm_control import (ABORT_CODE, COLLECTIVES, DESC_FIELDS, DTYPES, OPS,
                                          ControlWords, bit, describe)
from msccl_py.runtime.shm_program import RankProgram
from msccl_py.runtime.shm_python import SPIN, PythonExecutor
from msccl_py.runtime.shm_report import barrier_wait, xml_wait_report
from msccl_py.runtime.shm_threadblocks import CallTemplate, call_template

__all__ = ["COLLECTIVES", "DTYPES", "OPS", "SPIN_NS", "RankRuntime", "bit", "describe"]

#: how long the native executor polls, yielding the CPU between looks, before it sleeps:
#: always, as a look costs little and sched_yield runs a rank that shares the core (1 MiB
#: allreduce on 8 ranks on 2 cores: 2.2-3.2 ms against 4.5-7.5 ms sleeping at once)
SPIN_NS = 200_000
#: longest single sleep; also how often a sleeping rank checks the clock and its parent
WAIT_SLICE = 0.1


class RankRuntime:
    """What one rank process holds: the arena, its peers' doorbells, the abort protocol."""

    def __init__(self, arena: A.Arena, rank: int, world_size: int, sems: list, lock,
                 timeout: float, parent_pid: int, records: list[int] | None = None):
        self.arena = arena
        self.layout = arena.layout
        self.words = arena.words
        # ``records``: where this rank reads each peer's words (a peer on another host: the
        # mirror its link keeps, and ``sems[peer]`` is then the link's doorbell)
        self.control = ControlWords(arena.words, arena.layout, records)
        self.rank = rank
        self.world_size = world_size
        self.sems = sems
        self.posts = [s.release for s in sems]
        self.sem = sems[rank]
        self.bit = bit(rank)
        self.sleep_words = [r + A.REC_SLEEP for r in self.control.records]
        #: carries this rank's connections to ranks on other hosts (joined groups; see
        #: :mod:`.shm_link`), set by whoever builds the runtime
        self.link = None
        self._peer_sleep_words = [(p, sw) for p, sw in enumerate(self.sleep_words) if p != rank]
        self.fence = threading.Lock()
        self.spin = SPIN
        self._templates: dict[tuple, tuple] = {}
        self.lock = lock
        self.timeout = float(timeout)
        self.parent_pid = parent_pid
        self.seq = 0
        self.desc: tuple[int, ...] = (0,) * DESC_FIELDS
        self.verified = [0] * world_size
        self.in_call = False
        self._scratch: dict[tuple[str, int], np.ndarray] = {}
        #: the call shape in flight, whose threadblocks :meth:`wait_report` describes
        self.call: CallTemplate | None = None
        self.control.set_pid(rank, os.getpid())
        self.python = PythonExecutor(self)
        lib = shm_native.library()
        self.native = shm_native.NativeExecutor(self, lib) if lib is not None else None

    # ----- call descriptors and rendezvous ---------------------------------------------
    def enter(self, desc: tuple[int, ...]) -> int:
        """Start call ``seq+1`` with descriptor ``desc`` (7 ints) and wake every peer."""
        if self.words[ABORT_CODE]:
            self._aborted(lambda: "")
        self.seq += 1
        seq = self.seq
        if type(desc) is not tuple:
            desc = tuple(int(v) for v in desc)
        self.desc = desc
        self.control.publish(self.rank, seq, desc)
        self.in_call = True
        fence = self.fence
        fence.acquire()
        fence.release()
        w = self.words
        me = self.bit
        for p, sw in self._peer_sleep_words:
            if w[sw] & me:
                self.posts[p]()
        return seq

    def leave(self) -> None:
        self.in_call = False
        if self.link is not None:
            self.link.leave(self.seq)

    def peer_ready(self, peer: int) -> bool:
        """True once ``peer`` has entered this call with an equal descriptor."""
        seq = self.seq
        if self.verified[peer] >= seq:
            return True
        ctl = self.control
        if ctl.seq(peer) < seq:
            if ctl.done(peer) and ctl.seq(peer) < seq:
                self._finished(peer)
            return False
        theirs = ctl.descriptor(peer, seq)
        if theirs is not None and theirs != self.desc:
            self._mismatch(peer, theirs)
        self.verified[peer] = seq
        return True

    def peer_descriptor_next(self, peer: int) -> tuple[int, ...] | None:
        """``peer``'s descriptor of the next call (the one this rank is about to enter)."""
        ctl = self.control
        seq = self.seq + 1
        if ctl.seq(peer) < seq:
            if ctl.done(peer) and ctl.seq(peer) < seq:
                msg = (f"mismatched collective calls: rank {self.rank} waits for rank {peer} "
                       f"to start call #{seq} but rank {peer} returned after "
                       f"{ctl.seq(peer)} calls")
                self.abort(A.ABORT_MISMATCH, msg)
                raise MscclRuntimeError(msg)
            return None
        return ctl.descriptor(peer, seq)

    def finish(self) -> None:
        """Mark this rank as done (no more calls) and wake every peer that waits on it."""
        ctl = self.control
        ctl.set_done(self.rank)
        fence = self.fence
        fence.acquire()
        fence.release()
        for p in range(self.world_size):
            if p != self.rank and ctl.sleep_mask(p) & self.bit:
                self.posts[p]()

    def _finished(self, peer: int) -> None:
        msg = (f"mismatched collective calls: rank {self.rank} entered call #{self.seq} "
               f"{describe(self.desc)} but rank {peer} returned after "
               f"{self.control.seq(peer)} calls")
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
        if self.link is not None:
            self.link.begin(None)
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
            return barrier_wait(pending)

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
        self._native_failed(rc, lambda: barrier_wait(missing), self.native.bctl)

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
        fence = self.fence
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
                if w[ABORT_CODE]:
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

    def abort(self, code: int, message: str, origin: int | None = None) -> bool:
        """Record the group's first failure and wake everyone; True if this was the first.
        ``origin``: the rank that failed, when it is not this one (a peer seen to die, a
        failure reported from another host); -1 when no rank is known to have failed (a
        connection between hosts broke)."""
        ctl = self.control
        first = False
        got = self.lock.acquire(True, 2.0)
        try:
            if not ctl.abort_code:
                n = self.arena.write_text(self.layout.message_offset, A.MSG_BYTES, message)
                ctl.set_abort(code, self.rank if origin is None else origin, n)
                first = True
        finally:
            if got:
                self.lock.release()
        for p in range(self.world_size):
            if p != self.rank:
                self.posts[p]()
        return first

    def abort_message(self) -> tuple[int, int, str]:
        """(code, origin rank, message) of the group's first failure."""
        code, origin, length = self.control.abort_record()
        return code, origin, self.arena.read_text(self.layout.message_offset, length)

    def write_report(self, text: str) -> None:
        n = self.arena.write_text(self.layout.report_offset(self.rank), A.REPORT_BYTES, text)
        self.control.set_report_length(self.rank, n)

    def _aborted(self, report: Callable[[], str]) -> None:
        code, origin, msg = self.abort_message()
        if self.in_call:
            self.write_report(f"in call #{self.seq} {describe(self.desc)}: {report()}")
        self.in_call = False
        cls = MscclDeadlockError if code == A.ABORT_DEADLOCK else MscclRuntimeError
        why = f"rank {origin} failed" if origin >= 0 else "a connection between hosts broke"
        raise cls(f"rank {self.rank}: call #{self.seq} aborted because {why}: {msg}")

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

    def execute(self, prog: RankProgram, bufs: list, chunk_elems: int, dtype: np.dtype,
                op: str) -> None:
        """Run this rank's threadblocks of ``prog`` once (call :meth:`enter` first).

        ``bufs`` are the input, output and scratch arrays (1-D, ``dtype``; any
        may alias); ``chunk_elems`` is S.
        """
        S = chunk_elems
        call = self._template(prog, S, dtype)
        link = self.link
        if link is not None:
            link.begin(call, S)
        try:
            if call.iterations and prog.tbs and not (
                    self.native is not None and
                    self._execute_native(prog, call, bufs, S, dtype, op)):
                self.python.execute(prog, call, bufs, S, dtype, op)
        except BaseException:
            if link is not None:
                link.cancel()
            raise
        if link is not None:
            link.end()

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
        call = self._template(prog, S, dtype)
        packed = None
        if self.native is not None and call.iterations and prog.tbs:
            packed = self.native.prepare(prog, S, dtype, call)
        first = [bufs[1]]

        def output() -> np.ndarray:
            if first:
                return first.pop()
            return np.empty(bufs[1].shape, dtype=bufs[1].dtype)

        if packed is None or self.link is not None or \
                not all(b.flags.c_contiguous for b in bufs):
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

        def native_call() -> np.ndarray:
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
                    self._native_stopped(rc, call, state, ctl)
            finally:
                self.in_call = False
            return out
        return native_call

    def _execute_native(self, prog: RankProgram, call: CallTemplate, bufs: list, S: int,
                        dtype: np.dtype, op: str) -> bool:
        """:meth:`execute` in compiled code (False: it cannot take this call); failures end
        the way the Python loop's do."""
        native = self.native
        packed = native.prepare(prog, S, dtype, call)
        if packed is None:
            return False
        rc, state = native.execute(packed, bufs, op, SPIN_NS)
        if rc == shm_native.RC_DONE:
            return True
        if rc == shm_native.RC_UNFIT:
            return False
        self._native_stopped(rc, call, state, packed[0])
        return True

    def _native_stopped(self, rc: int, call: CallTemplate, state: np.ndarray,
                        ctl: np.ndarray) -> None:
        """Raise for a native call that ended with ``rc``, with the Python loop's report."""
        shm_native.restore(call.tbs, state)
        self.call = call
        self._native_failed(rc, self.wait_report, ctl)

    def _template(self, prog: RankProgram, S: int, dtype: np.dtype) -> CallTemplate:
        """The :class:`CallTemplate` of one call shape (cached, reused)."""
        key = (id(prog), S, dtype.str)
        hit = self._templates.get(key)
        if hit is not None and hit[0] is prog:
            return hit[1]
        value = call_template(prog, S, dtype, self.arena, self.sleep_words)
        if len(self._templates) > 256:
            self._templates.clear()
        self._templates[key] = (prog, value)
        return value

    def wait_report(self) -> str:
        """What each unfinished threadblock of the current call waits on."""
        return xml_wait_report(self.call, self.seq, self.control)
