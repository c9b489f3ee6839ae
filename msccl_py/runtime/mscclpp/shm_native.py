"""The MSCCL++ plan executor in compiled code: ``runtime/mscclpp/native/plan_exec.cpp``, via ctypes.

It is built like the XML shm runtime's executor (:mod:`msccl_py.runtime.shm_native`,
whose wait protocol and arithmetic it shares through ``runtime/include/shm_rank.h``),
into the same cache, keyed by a hash of its sources, flags and CPU, and
obeys the same ``MSCCL_PY_SHM_EXECUTOR`` switch: ``python`` forces the Python
fallback, ``native`` makes a failed build an error, ``auto`` falls back with
a one-line note.

>>> TABLE_ORDER[:3]
('tbs', 'steps', 'acts')
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.mscclpp.shm_program import (ACT_W, CHAN_W, DST_W, STEP_W, RankTables)
from msccl_py.transport import cxx_build
from msccl_py.runtime import shm_native as xml_native
from msccl_py.runtime.include import INCLUDE_DIR

SOURCE = Path(__file__).resolve().parent / "native" / "plan_exec.cpp"
# q[] slots (plan_exec.cpp's Q_* enum)
(Q_TBS, Q_NTB, Q_STEPS, Q_ACTS, Q_SRCS, Q_DSTS, Q_CHANS, Q_CHECKS, Q_LISTS, Q_RESETS, Q_NRESETS,
 Q_SEM_INIT, Q_NSEMS, Q_TAKEN, Q_NTAKEN, Q_SEMS, Q_BARS, Q_NBARS, Q_STATE, Q_FILL, Q_PHASE,
 Q_WORDS) = range(22)
TABLE_ORDER = ("tbs", "steps", "acts", "srcs", "dsts", "chans", "checks", "lists", "resets")
STATE_W = 4
#: what a blocked threadblock waits for (state column 1)
X_NONE, X_SIGNAL, X_PACKETS, X_BARRIER, X_SEMAPHORE = range(5)
#: how far a call got (q[Q_PHASE])
PHASE_ENTER, PHASE_RUN, PHASE_DONE = range(3)
ABI = Q_WORDS * 100000 + STEP_W * 10000 + ACT_W * 1000 + DST_W * 10 + CHAN_W

def build() -> Path:
    """Compile the plan executor once per source hash; return the library's path."""
    cxx = cxx_build.compiler()
    if cxx is None:
        raise MscclRuntimeError("no C++ compiler (g++, or $CXX) was found")
    flags = xml_native.build_flags()
    key = cxx_build.digest(xml_native.sources(SOURCE), cxx, flags)
    return cxx_build.build(SOURCE, xml_native.cache_dir() / f"msccl_plan_{key}.so", cxx, flags,
                           INCLUDE_DIR, SOURCE.name)


def _bind(lib: ctypes.CDLL) -> None:
    lib.msccl_plan_execute.restype = ctypes.c_int
    lib.msccl_plan_execute.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                       ctypes.c_void_p]
    if lib.msccl_plan_abi() != ABI:
        raise MscclRuntimeError(f"the plan executor's table layout differs from "
                                f"runtime/mscclpp/shm_native.py (abi {lib.msccl_plan_abi()} "
                                f"!= {ABI})")


_library = cxx_build.Library(build, _bind, xml_native.ENV_MODE,
                             "the shm runtime runs MSCCL++ plans with its Python executor")


def library() -> ctypes.CDLL | None:
    """The loaded plan executor, or None (forced off, or it cannot be built: noted once)."""
    return _library.get(xml_native.mode())


class PlanCall:
    """One rank's call of one plan shape: its tables and state arrays, and one ctypes call.

    ``head`` is the rank's XML executor parameter block
    (:class:`msccl_py.runtime.shm_native.NativeExecutor`), which carries the
    arena, the doorbells and the peers' words. Each call gives the reduction
    and the descriptor the executor enters with.
    """

    def __init__(self, lib: ctypes.CDLL, head: np.ndarray, world: int, tables: RankTables,
                 dtype: np.dtype):
        a = tables.arrays
        self.arrays = a                                 # referenced: the tables' addresses
        self.taken = np.zeros(max(tables.nslots, 1), np.int64)
        self.sems = np.zeros(len(a["sem_init"]), np.int64)
        self.bars = np.zeros(2 * max(len(tables.barrier_slots), 1), np.int64)
        self.state = np.zeros((max(len(tables.steps), 1), STATE_W), np.int64)
        self.missing = np.zeros(world, np.int64)
        self.desc = np.zeros(7, np.int64)
        q = np.zeros(Q_WORDS, np.int64)
        for slot, name in zip((Q_TBS, Q_STEPS, Q_ACTS, Q_SRCS, Q_DSTS, Q_CHANS, Q_CHECKS, Q_LISTS,
                               Q_RESETS), TABLE_ORDER):
            q[slot] = a[name].ctypes.data
        q[Q_NTB] = len(tables.steps)
        q[Q_NRESETS] = tables.rows["resets"]
        q[Q_SEM_INIT], q[Q_NSEMS] = a["sem_init"].ctypes.data, tables.rows["sem_init"]
        q[Q_TAKEN], q[Q_NTAKEN] = self.taken.ctypes.data, tables.nslots
        q[Q_SEMS] = self.sems.ctypes.data
        q[Q_BARS], q[Q_NBARS] = self.bars.ctypes.data, len(tables.barrier_slots)
        q[Q_STATE] = self.state.ctypes.data
        q[Q_FILL] = tables.fill
        self.q = q
        ctl = head.copy()
        ctl[xml_native.C_STATE] = self.missing.ctypes.data
        ctl[xml_native.C_ENTER] = self.desc.ctypes.data
        self.ctl = ctl
        self.dcode = xml_native.DTYPES.index(dtype.name)
        self._run = lib.msccl_plan_execute

    def __call__(self, op: str, desc: tuple[int, ...], timeout: float, spin_ns: int) -> int:
        """Clear, enter call ``desc``, meet the peers and run; RC_* of runtime.shm_native."""
        self.desc[:] = desc
        self.ctl[xml_native.C_TIMEOUT_NS] = int(timeout * 1e9)
        self.ctl[xml_native.C_SPIN_NS] = spin_ns
        return self._run(self.dcode, xml_native.OP_CODES[op], self.ctl.ctypes.data,
                         self.q.ctypes.data)

    @property
    def phase(self) -> int:
        return int(self.q[Q_PHASE])
