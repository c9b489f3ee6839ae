"""The shm runtime's native data path: ``native/shm_exec.cpp`` built with g++, driven via ctypes.

:class:`NativeExecutor` runs one rank's threadblocks of a call in compiled
code, with the Python executor's plan, FIFO geometry and wake-up protocol
(see :mod:`.shm_exec`), so results are the same bit for bit. The library is
built at first use into ``$MSCCL_PY_CACHE/native`` (default
``~/.cache/msccl_py/native``), keyed by a hash of the sources and flags; a
process group builds it in the parent before starting ranks, so ranks only
load it. ``MSCCL_PY_SHM_EXECUTOR=python`` forces the Python executor;
without a C++ compiler the runtime falls back to it with a one-line note.

>>> mode() in ("auto", "native", "python")
True
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

import numpy as np

from msccl_py.errors import MscclRuntimeError
from msccl_py.plan.contract import BACKENDS, OPS, device_op_code
from msccl_py.plan.tables import check_op_enum
from msccl_py.transport import cxx_build
from msccl_py.transport import shm_arena as A
from msccl_py.runtime.bfloat16 import element_type
from msccl_py.runtime.include import INCLUDE_DIR
from msccl_py.runtime.shm_threadblocks import CallTemplate, TbState

SOURCE = Path(__file__).resolve().parent / "native" / "shm_exec.cpp"
#: the headers it includes (from ``runtime/include``): the GPU kernel's arithmetic, and
#: what it shares with the MSCCL++ plan executor (mscclpp/native/plan_exec.cpp)
HEADERS = ("platform.h", "ops.h", "shm_rank.h")
CXXFLAGS = ("-std=c++20", "-O3", "-shared", "-fPIC", "-Wall", "-Wextra", "-Wno-unknown-pragmas")
#: on x86-64 the build targets this machine's vector units (AVX2/AVX-512 reductions: about
#: 10% off a 64 MiB allreduce on 4 ranks); no FMA contraction, so results stay bit-identical
NATIVE_FLAGS = ("-march=native", "-ffp-contract=off")
ENV_MODE = "MSCCL_PY_SHM_EXECUTOR"
#: dtypes the native build handles, in its dtype-code order (the contract's table)
DTYPES = BACKENDS["shm-native"].dtypes
OP_CODES = {op: device_op_code(op) for op in OPS}

# ctl[] slots (shm_exec.cpp's C_* enum)
(C_BASE, C_BUF0, C_BUF1, C_BUF2, C_TBS, C_STEPS, C_DEPS, C_STATE, C_SEMS, C_VERIFIED, C_S,
 C_NITER, C_L, C_MAC, C_CAP, C_M, C_NTB, C_SLOT, C_RANK, C_WORLD, C_SPIN_NS,
 C_TIMEOUT_NS, C_PARENT, C_HIST, C_DESC_WORDS, C_OUT_PEER, C_ENTER, C_PEERS) = range(28)
P_WORDS = 4
TB_WORDS = STEP_WORDS = 12
#: a threadblock's state row as the executor leaves it: iteration, step, transfer, wait
#: kind (shm_threadblocks.W_*), the awaited (threadblock, step), send tail, receive head
STATE_WORDS = 8
ABI = C_PEERS * 1000 + P_WORDS * 100 + TB_WORDS
RC_DONE, RC_ABORT, RC_DEADLOCK, RC_PARENT, RC_PEER = range(5)
#: :meth:`NativeExecutor.execute` cannot take these buffers (not contiguous)
RC_UNFIT = -2
#: calls on at most this many bytes keep their arrays referenced, to skip re-reading
#: their addresses next time (big ones would be kept alive for nothing)
REMEMBER_BYTES = 1 << 20

def mode() -> str:
    """``$MSCCL_PY_SHM_EXECUTOR``: ``auto`` (native when it builds), ``native`` or ``python``."""
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in ("auto", "native", "python"):
        raise MscclRuntimeError(f"{ENV_MODE}={value!r}: use auto, native or python")
    return value


def cache_dir() -> Path:
    return cxx_build.cache_dir("native")


def sources(source: Path = SOURCE) -> tuple[Path, ...]:
    """What a native executor ``source`` is built from: itself and the headers it includes."""
    return (source, *(INCLUDE_DIR / n for n in HEADERS))


def _key(cxx: str) -> str:
    return cxx_build.digest(sources(), cxx, build_flags())


def build_flags() -> tuple[str, ...]:
    """The native executors' compiler flags (on x86-64, tuned to this machine's vector units)."""
    return CXXFLAGS + NATIVE_FLAGS if platform.machine().lower() in ("x86_64", "amd64") \
        else CXXFLAGS


def build() -> Path:
    """Compile the native executor once per source hash; return the library's path.

    Raises :class:`MscclRuntimeError` when there is no compiler or it fails.
    """
    cxx = cxx_build.compiler()
    if cxx is None:
        raise MscclRuntimeError("no C++ compiler (g++, or $CXX) was found")
    check_op_enum(SOURCE.read_text(), 0, str(SOURCE))
    return cxx_build.build(SOURCE, cache_dir() / f"msccl_shm_{_key(cxx)}.so", cxx, build_flags(),
                           INCLUDE_DIR, SOURCE.name)


def _bind(lib: ctypes.CDLL) -> None:
    lib.msccl_shm_execute.restype = ctypes.c_int
    lib.msccl_shm_execute.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.msccl_shm_barrier.restype = ctypes.c_int
    lib.msccl_shm_barrier.argtypes = [ctypes.c_void_p]
    if lib.msccl_shm_abi() != ABI:
        raise MscclRuntimeError(f"the native executor's table layout differs from "
                                f"shm_native.py (abi {lib.msccl_shm_abi()} != {ABI})")


_library = cxx_build.Library(build, _bind, ENV_MODE, "the shm runtime uses its Python executor")


def library() -> ctypes.CDLL | None:
    """The loaded native library, or None (forced off, or it cannot be built: noted once)."""
    return _library.get(mode())


def restore(tbs: list[TbState], state: np.ndarray) -> None:
    """Copy where a stopped native call left each threadblock into ``tbs`` (for the report)."""
    for st, row in zip(tbs, state.tolist()):
        st.it, st.si, st.ti, st.wait, dt, ds, st.stail, st.rhead = row
        st.wdep = (dt, ds)


def sem_handle(sem) -> int:
    """The ``sem_t*`` of a ``multiprocessing`` semaphore or a shared-memory one."""
    handle = getattr(sem, "handle", None)
    return int(handle) if handle is not None else int(sem._semlock.handle)


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class NativeExecutor:
    """One rank's native executor: per-call-shape packed tables, then one ctypes call per call.

    ``rt`` is the rank's :class:`~msccl_py.runtime.shm_exec.RankRuntime`.
    """

    def __init__(self, rt, lib: ctypes.CDLL):
        self.rt = rt
        self.run_ = lib.msccl_shm_execute
        self.barrier_ = lib.msccl_shm_barrier
        lay = rt.layout
        n = rt.world_size
        self.base = np.frombuffer(rt.arena.map, dtype=np.uint8, count=8)
        self.sems = np.array([sem_handle(s) for s in rt.sems], dtype=np.uint64)
        self.verified = np.zeros(n, dtype=np.int64)
        # each peer's words as this rank reads them (a peer on another host: its mirror)
        peers = np.array([[r + A.REC_SEQ, r + A.LINE, r + A.REC_DONE, r + A.REC_SLEEP]
                          for r in rt.control.records], dtype=np.int64)
        self.head = np.zeros(C_PEERS + P_WORDS * n, dtype=np.int64)
        h = self.head
        h[C_BASE] = _address(self.base)
        h[C_SEMS] = _address(self.sems)
        h[C_VERIFIED] = _address(self.verified)
        h[C_RANK], h[C_WORLD] = rt.rank, n
        h[C_PARENT] = rt.parent_pid
        h[C_HIST], h[C_DESC_WORDS] = A.HIST, A.DESC_WORDS
        h[C_PEERS:] = peers.reshape(-1)
        self.shapes: dict[tuple, tuple] = {}
        self.missing = np.zeros(n, dtype=np.int64)
        self.bctl = h.copy()
        self.bctl[C_STATE] = _address(self.missing)
        self.baddr = _address(self.bctl)
        self.last: list = [None, None, None, None]

    def prepare(self, prog, S: int, dtype: np.dtype, call: CallTemplate) -> tuple | None:
        """Packed tables of one call shape (cached by its template); None when this build
        does not handle ``dtype``."""
        hit = self.shapes.get(id(call))
        if hit is not None and hit[0] is call:
            return hit[1]
        kind = element_type(dtype)
        if kind not in DTYPES:
            return None
        lay = self.rt.layout
        tbs, steps, deps = [], [], []
        for st in call.tbs:
            tb = st.prog
            # shm_exec.cpp's threadblock row: steps, first step, peers, FIFO counter words,
            # FIFO byte offsets (send, receive), two spare words
            tbs.append([len(tb.steps), len(steps), tb.send_peer, tb.recv_peer, st.stail_w,
                        st.shead_w, st.rtail_w, st.rhead_w,
                        lay.fifo(tb.send_conn) if tb.send_conn >= 0 else -1,
                        lay.fifo(tb.recv_conn) if tb.recv_conn >= 0 else -1, 0, 0])
            for step in tb.steps:
                # its step row: the Step record's fields, the dependencies as a range of deps
                steps.append([step.op, step.src_buf, step.src_off, step.dst_buf, step.dst_off,
                              step.count, len(deps), len(step.deps), int(step.has_dep),
                              int(step.recv), int(step.send), step.acc_buf])
                deps.extend(step.deps)
        tbs_a = np.array(tbs or [[0] * TB_WORDS], dtype=np.int64)
        steps_a = np.array(steps or [[0] * STEP_WORDS], dtype=np.int64)
        deps_a = np.array(deps or [[0, 0]], dtype=np.int64)
        state = np.zeros((max(1, len(call.tbs)), STATE_WORDS), dtype=np.int64)
        ctl = self.head.copy()
        ctl[C_TBS], ctl[C_STEPS], ctl[C_DEPS] = (_address(a) for a in (tbs_a, steps_a, deps_a))
        ctl[C_STATE] = _address(state)
        ctl[C_S], ctl[C_NITER], ctl[C_L] = S, call.iterations, call.iter_elems
        ctl[C_MAC], ctl[C_CAP] = call.max_count, call.fifo_transfers
        ctl[C_M], ctl[C_NTB] = prog.max_steps, len(call.tbs)
        ctl[C_SLOT] = lay.buffsize // call.fifo_transfers // dtype.itemsize
        value = (ctl, state, DTYPES.index(kind), (tbs_a, steps_a, deps_a),
                 _address(ctl))
        if len(self.shapes) > 256:
            self.shapes.clear()
        self.shapes[id(call)] = (call, value)
        return value

    def execute(self, packed: tuple, bufs: list, op: str, spin_ns: int) -> tuple[int, np.ndarray]:
        """Run the call; returns (RC_*, per-threadblock state rows)."""
        ctl, state, dcode, _, addr = packed
        last = self.last
        # the same arrays as last time (held here, so identity is safe) keep their addresses
        if bufs[0] is not last[0] or bufs[1] is not last[1] or bufs[2] is not last[2] or \
                last[3] is not ctl:
            if not (bufs[0].flags.c_contiguous and bufs[1].flags.c_contiguous and
                    bufs[2].flags.c_contiguous):
                return RC_UNFIT, state
            ctl[C_BUF0] = _address(bufs[0])
            ctl[C_BUF1] = _address(bufs[1])
            ctl[C_BUF2] = _address(bufs[2])
            small = bufs[0].nbytes + bufs[1].nbytes <= REMEMBER_BYTES
            self.last = [bufs[0], bufs[1], bufs[2], ctl] if small else [None] * 4
        self._waits(ctl, spin_ns)
        return self.run_(dcode, OP_CODES[op], addr), state

    def bind(self, packed: tuple, bufs: list, op: str, spin_ns: int,
             desc: tuple[int, ...]) -> tuple:
        """A call on fixed buffers that enters call ``desc`` itself: (function of no
        arguments returning RC_*, state, ctl).

        The call gets its own copy of the parameters, so other calls of the
        same shape cannot move its buffers.
        """
        ctl, state, dcode, tables, _ = packed
        own = ctl.copy()
        own[C_BUF0] = _address(bufs[0])
        own[C_BUF1] = _address(bufs[1])
        own[C_BUF2] = _address(bufs[2])
        words = np.array(desc, dtype=np.int64)
        own[C_ENTER] = _address(words)
        self._waits(own, spin_ns)

        # the defaults keep what the addresses point at alive as long as the function
        def call(run=self.run_, dcode=dcode, code=OP_CODES[op], addr=_address(own),
                 _keep=(own, tables, bufs, words)) -> int:
            return run(dcode, code, addr)
        return call, state, own

    def _waits(self, ctl: np.ndarray, spin_ns: int) -> None:
        timeout = int(self.rt.timeout * 1e9)
        if ctl[C_SPIN_NS] != spin_ns or ctl[C_TIMEOUT_NS] != timeout:
            ctl[C_SPIN_NS] = spin_ns
            ctl[C_TIMEOUT_NS] = timeout

    def barrier(self, spin_ns: int) -> tuple[int, list[int]]:
        """Wait until every peer entered the current call; (RC_*, ranks still missing)."""
        self._waits(self.bctl, spin_ns)
        rc = self.barrier_(self.baddr)
        if rc == RC_DONE:
            return rc, []
        return rc, [p for p, m in enumerate(self.missing.tolist()) if m]
