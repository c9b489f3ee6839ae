"""Bootstrap and supervision of one OS process per rank.

A :class:`ProcessGroup` creates the shared arena (:mod:`.shm_arena`), one
semaphore per rank (its doorbell) and a pipe per rank, starts the ranks and
watches them. Each rank runs ``target(runtime, conn, *args)`` with a
:class:`~msccl_py.runtime.shm_exec.RankRuntime`; what it returns goes back
over its pipe. The parent turns failures into one exception:

* a rank raising: the group's abort record is set (peers blocked in a
  collective stop at once) and :class:`RankError` carries that rank's error;
* a rank dying: the parent sees its sentinel, records the death in the abort
  record and wakes the others, which raise within milliseconds;
* no progress: the ranks' own watchdogs raise
  :class:`~msccl_py.errors.MscclDeadlockError`; the parent merges every
  rank's wait report into one message.

Ranks that do not stop within ``grace`` seconds of the first failure are
killed. Ranks die with their parent (``PR_SET_PDEATHSIG``), and the arena is
a memfd, so nothing outlives the group. The CuPy runtime can reuse the group
for one process per GPU (``target`` is any picklable callable).

Start methods: ``fork`` (default on Linux) starts fast and accepts closures;
``spawn``/``forkserver`` need ``target`` and ``args`` to be picklable and
re-import the caller's ``__main__`` (guard scripts with ``if __name__ ==
"__main__":``).

>>> def hello(rt, conn):
...     return rt.rank * 10
>>> with ProcessGroup(2) as group:            # doctest: +SKIP
...     group.start(hello)
...     group.wait()
[0, 10]
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from msccl_py.errors import MscclDeadlockError, MscclError, MscclRuntimeError
from msccl_py.transport import shm_arena as A
from msccl_py.runtime import shm_native
from msccl_py.runtime.shm_exec import RankRuntime

#: CPU FIFO size per connection: large slots mean fewer, cheaper Python steps
DEFAULT_BUFFSIZE = 1 << 20
DEFAULT_TIMEOUT = float(os.environ.get("MSCCL_PY_TIMEOUT", "60"))
DEFAULT_GRACE = 3.0
_PR_SET_PDEATHSIG = 1
#: a target returning this sends no final reply (a server told to exit)
QUIET = "__msccl_py_quiet__"


class RankError(MscclRuntimeError):
    """Rank ``rank`` raised ``remote_type``; ``remote_traceback`` is its traceback text."""

    def __init__(self, message: str, rank: int, remote_type: str = "",
                 remote_traceback: str = ""):
        super().__init__(message)
        self.rank = rank
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback


def default_start_method() -> str:
    """``fork`` where the platform has it (fast, closures allowed), else ``spawn``."""
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def _die_with_parent(parent: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _bootstrap(layout: A.Layout, fd: int, parent: int, inherited: bool, rank: int, sems: list,
               lock, conn, timeout: float, target: Callable, args: tuple) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    arena = A.Arena.attach(layout, fd, parent, inherited)
    rt = RankRuntime(arena, rank, layout.world_size, sems, lock, timeout, parent)
    try:
        conn.send(("ready", rank))
        value = target(rt, conn, *args)
        rt.finish()
        if isinstance(value, str) and value == QUIET:
            return
        try:
            conn.send(("ok", value))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise MscclRuntimeError(f"rank {rank}: its return value cannot be sent to the "
                                    f"parent: {exc}") from exc
    except BaseException as exc:  # every failure must reach the parent
        text = "".join(traceback.format_exception(exc))
        rt.abort(A.ABORT_ERROR, f"rank {rank} raised {type(exc).__name__}: {exc}")
        try:
            blob = pickle.dumps(exc)
        except Exception:
            blob = None
        try:
            conn.send(("err", type(exc).__name__, str(exc), text, blob))
        except (OSError, EOFError):
            pass
    finally:
        arena.close()


def _death(code: int | None) -> str:
    if code is None:
        return "stopped"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def wait_or_drop(group: "ProcessGroup", pool, pools: dict) -> list:
    """``group.wait()``; on any failure ``pool`` (its processes in an unknown state) is first
    forgotten under every key of ``pools`` that holds it and closed, then the error goes on.

    The shared-memory runtimes keep their rank pools this way, one dict per runtime.
    """
    try:
        return group.wait()
    except BaseException:
        for k in [k for k, v in pools.items() if v is pool]:
            del pools[k]
        pool.close()
        raise


#: the smallest per-rank data region a pool is started with (bytes; the arena is sparse:
#: only touched pages cost)
MIN_POOL_DATA = 1 << 30


def plan_key(obj) -> tuple[bytes, int]:
    """``obj`` pickled, and the 56-bit key the ranks know it by (an algorithm or a plan)."""
    blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return blob, int.from_bytes(hashlib.blake2b(blob, digest_size=7).digest(), "little")


class RankPools(dict):
    """Pools of rank processes kept between calls, one per key, most recently used last.

    A pool has ``group``, ``data_bytes`` and ``close()``; :meth:`pool` restarts
    one whose processes died or whose data regions are too small, and keeps at
    most ``limit`` (None: any number). Every pool closes at exit. Both
    shared-memory runtimes (XML and MSCCL++ plans) keep theirs here.
    """

    def __init__(self, make: Callable, limit: int | None = None):
        super().__init__()
        self.make, self.limit = make, limit
        atexit.register(self.close)

    def pool(self, key, nbytes: int, *args):
        """The pool under ``key`` with data regions of at least ``nbytes`` (``make(*args,
        data_bytes)`` starts a new one)."""
        found = self.get(key)
        if found is not None and (found.data_bytes < nbytes or not found.group.alive):
            self.pop(key).close()
            found = None
        if found is None:
            while self.limit and len(self) >= self.limit:
                self.pop(next(iter(self))).close()
            found = self[key] = self.make(*args, max(MIN_POOL_DATA, nbytes))
        else:
            self[key] = self.pop(key)
        return found

    def close(self) -> None:
        """Stop every pooled rank process (they restart on the next call)."""
        while self:
            self.popitem()[1].close()


class ProcessGroup:
    """``world_size`` rank processes over one shared arena (see the module docstring).

    ``buffsize``: FIFO bytes per connection. ``data_bytes``: per-rank input
    and output regions for parent-side data exchange (0: none). ``timeout``:
    seconds without progress before a collective raises.
    """

    def __init__(self, world_size: int, *, start_method: str | None = None,
                 buffsize: int = DEFAULT_BUFFSIZE, data_bytes: int = 0,
                 timeout: float = DEFAULT_TIMEOUT, grace: float = DEFAULT_GRACE):
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise MscclRuntimeError(f"world_size must be a positive integer, got {world_size!r}")
        if timeout <= 0:
            raise MscclRuntimeError(f"timeout must be positive, got {timeout!r}")
        self.world_size = world_size
        self.start_method = start_method or default_start_method()
        try:
            self.ctx = mp.get_context(self.start_method)
        except ValueError as exc:
            raise MscclRuntimeError(f"unknown start method {self.start_method!r}") from exc
        self.timeout = float(timeout)
        self.grace = float(grace)
        self.layout = A.Layout(world_size, int(buffsize), int(data_bytes))
        shm_native.library()    # build here, once, not in every rank
        self.arena = A.Arena.create(self.layout)
        self.sems = [self.ctx.Semaphore(0) for _ in range(world_size)]
        self.lock = self.ctx.Lock()
        self.procs: list = []
        self.conns: list = []
        self.alive = False

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- start -------------------------------------------------------------------------
    def start(self, target: Callable, args: tuple = ()) -> None:
        """Start every rank running ``target(runtime, conn, *args)``; wait until all are up."""
        inherited = self.start_method == "fork"
        parent = os.getpid()
        try:
            for rank in range(self.world_size):
                ours, theirs = self.ctx.Pipe(duplex=True)
                proc = self.ctx.Process(
                    target=_bootstrap, name=f"msccl_py-rank{rank}", daemon=True,
                    args=(self.layout, self.arena.fd, parent, inherited, rank, self.sems,
                          self.lock, theirs, self.timeout, target, tuple(args)))
                proc.start()
                theirs.close()
                self.procs.append(proc)
                self.conns.append(ours)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            self.close()
            raise MscclRuntimeError(
                f"cannot start rank processes with start method {self.start_method!r}: "
                f"{exc} (spawn and forkserver need a picklable, module-level function)") from exc
        except OSError as exc:
            self.close()
            raise MscclRuntimeError(f"cannot start rank processes: {exc}") from exc
        self.alive = True
        ready = self._gather(lambda msg: msg[0] == "ready", deadline=time.monotonic() + 120)
        if len(ready) < self.world_size:
            self.fail()

    # ----- talking to ranks --------------------------------------------------------------
    def send(self, rank: int, message: Any) -> None:
        try:
            self.conns[rank].send(message)
        except (OSError, EOFError, BrokenPipeError):
            pass  # the rank is gone; wait() reports how

    def wait(self) -> list:
        """Each rank's next reply value, in rank order; raises on any failure."""
        replies = self._gather(lambda msg: msg[0] == "ok")
        if len(replies) < self.world_size:
            self.fail()
        return [replies[r][1] for r in range(self.world_size)]

    def _gather(self, accept: Callable, deadline: float | None = None) -> dict:
        """Read one message per rank; stop at the first failure (kept in ``self.failures``)."""
        self.failures: dict[int, tuple] = {}
        replies: dict[int, tuple] = {}
        pending = set(range(self.world_size))
        first_failure = None
        while pending:
            objs = {}
            for r in pending:
                objs[self.conns[r]] = ("conn", r)
                objs[self.procs[r].sentinel] = ("proc", r)
            ready = mpc.wait(list(objs), timeout=0.2)
            for obj in ready:
                kind, r = objs[obj]
                if r not in pending:
                    continue
                if kind == "conn":
                    try:
                        msg = self.conns[r].recv()
                    except (EOFError, OSError):
                        self._died(r)
                        pending.discard(r)
                        continue
                    except Exception as exc:
                        msg = ("err", type(exc).__name__,
                               f"its reply cannot be unpickled here: {exc}", "", None)
                    if accept(msg):
                        replies[r] = msg
                        pending.discard(r)
                    elif msg[0] == "err":
                        self.failures[r] = msg
                        pending.discard(r)
                elif not self.conns[r].poll():
                    self._died(r)
                    pending.discard(r)
            now = time.monotonic()
            if self.failures and first_failure is None:
                first_failure = now
            if first_failure is not None and now - first_failure > self.grace:
                for r in sorted(pending):
                    self.failures[r] = ("killed", "did not stop after the failure; killed")
                break
            if deadline is not None and now > deadline:
                for r in sorted(pending):
                    self.failures[r] = ("killed", "did not start in time; killed")
                self.abort(A.ABORT_ERROR, min(pending), "ranks did not start in time")
                break
        return replies

    def _died(self, rank: int) -> None:
        """Record that ``rank`` ended without a reply and stop the others."""
        self.procs[rank].join(1.0)
        how = _death(self.procs[rank].exitcode)
        self.failures[rank] = ("died", how)
        self.abort(A.ABORT_DIED, rank, f"rank {rank} died ({how})")

    def abort(self, code: int, origin: int, message: str) -> None:
        """Record a failure in the arena (if none yet) and wake every rank."""
        w = self.arena.words
        got = self.lock.acquire(True, 2.0)
        try:
            if not w[0]:
                w[2] = self.arena.write_text(self.layout.message_offset, A.MSG_BYTES, message)
                w[1] = origin
                w[0] = code
        finally:
            if got:
                self.lock.release()
        for sem in self.sems:
            sem.release()

    # ----- failure -----------------------------------------------------------------------
    def error(self) -> MscclError:
        """The exception that describes the group's failure (after ``_gather``)."""
        w = self.arena.words
        code, origin = int(w[0]), int(w[1])
        message = self.arena.read_text(self.layout.message_offset, int(w[2]))
        failures = self.failures
        if code == A.ABORT_DEADLOCK:
            return MscclDeadlockError(f"{message}. Per rank:\n{self.reports()}")
        if code == A.ABORT_MISMATCH:
            return MscclRuntimeError(message)
        if code == A.ABORT_DIED:
            return MscclRuntimeError(f"{message}; the other ranks were stopped")
        rank = origin if origin in failures and failures[origin][0] == "err" else \
            min((r for r, f in failures.items() if f[0] == "err"), default=None)
        if rank is None:
            r, f = min(failures.items()) if failures else (origin, ("killed", message))
            return MscclRuntimeError(f"rank {r}: {f[1]}")
        _, tname, text, tb, blob = failures[rank]
        err = RankError(f"rank {rank} raised {tname}: {text}\n\nTraceback in rank {rank}:\n{tb}",
                        rank, tname, tb)
        if blob is not None:
            try:
                err.__cause__ = pickle.loads(blob)
            except Exception:
                pass
        return err

    def reports(self) -> str:
        """Every rank's wait report, one block per rank."""
        w = self.arena.words
        lines = []
        for r in range(self.world_size):
            n = int(w[self.layout.report_len_word(r)])
            text = self.arena.read_text(self.layout.report_offset(r), n) if n else ""
            if not text:
                f = self.failures.get(r)
                text = f"no report ({f[1] if f and f[0] != 'err' else 'not in a collective'})"
            lines.append(f"rank {r}: " + text.replace("\n", "\n    "))
        return "\n".join(lines)

    def fail(self) -> None:
        """Raise the group's failure after stopping every rank."""
        err = self.error()
        self.close(timeout=0.5)
        raise err

    # ----- teardown ----------------------------------------------------------------------
    def close(self, timeout: float = 2.0) -> None:
        """Stop every rank (politely, then by force) and release the arena."""
        if self.procs and any(p.is_alive() for p in self.procs):
            for conn in self.conns:
                try:
                    conn.send(("exit",))
                except (OSError, EOFError, BrokenPipeError):
                    pass
            deadline = time.monotonic() + timeout
            for p in self.procs:
                p.join(max(0.0, deadline - time.monotonic()))
            for p in self.procs:
                if p.is_alive():
                    p.kill()
            for p in self.procs:
                p.join(5)
        for conn in self.conns:
            conn.close()
        for p in self.procs:
            try:
                p.close()
            except ValueError:
                pass
        self.procs, self.conns = [], []
        self.alive = False
        if self.arena is not None:
            self.arena.close()
            self.arena = None

    def __del__(self):
        if getattr(self, "procs", None) and sys is not None:
            try:
                self.close(timeout=0.5)
            except Exception:
                pass
