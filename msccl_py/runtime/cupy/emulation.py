"""Host emulation of the GPU interpreter: the kernel source under g++, driven via ctypes.

The shared library is built on first use into a cache directory keyed by a
hash of the kernel sources and flags (``$MSCCL_PY_CACHE`` or
``~/.cache/msccl_py``), so the same C++ the GPU runs is tested on machines
without one. Each emulated block is one OS thread (``threads`` per block
when asked, to exercise the barriers), the tables come from the same
:mod:`~msccl_py.runtime.cupy.packer`, and FIFO counters and dependency flags
persist across calls exactly as on the device.

>>> import numpy as np
>>> from msccl_py.runtime.shm_fallback import allgather_ring
>>> ring = allgather_ring(2)
>>> [o.tolist() for o in emulated_run(ring, [np.array([1.0, 2.0]), np.array([3.0, 4.0])])]
[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError
from msccl_py.transport import cxx_build
from msccl_py.plan.contract import REDUCING
from msccl_py.runtime.cupy import calls, packer
from msccl_py.runtime.cupy import kernel_source as source_module
from msccl_py.runtime.cupy.kernel_source import KERNEL_DIR, dtype_code, op_code

CXXFLAGS = ("-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-Wall", "-Wextra",
            "-Wno-unknown-pragmas")
#: the TSan build is an executable (Python cannot load a TSan library), see tsan_driver.cpp
TSAN_FLAGS = ("-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=thread", "-Wno-unknown-pragmas")
#: default watchdog of an emulated wait (seconds); emulated blocks are slow
DEFAULT_WATCHDOG = 20.0

_lock = threading.Lock()
_libs: dict[str, ctypes.CDLL] = {}


def cache_dir() -> Path:
    """Where built emulation libraries are kept."""
    return cxx_build.cache_dir("emulation")


def compiler() -> str | None:
    """The C++ compiler to use ($CXX or g++), or None when there is none."""
    return cxx_build.compiler()


def build(tsan: bool = False) -> Path:
    """Compile the emulation (once per source hash); return the built file's path.

    The normal build is a shared library for ctypes; ``tsan=True`` builds the
    ThreadSanitizer executable driver. Raises :class:`MscclRuntimeError` with
    the compiler's output when it fails.

    >>> build().suffix
    '.so'
    """
    cxx = compiler()
    if cxx is None:
        raise MscclRuntimeError("the host emulation needs a C++20 compiler: g++ was not found "
                                "(set CXX to use another)")
    flags = TSAN_FLAGS if tsan else CXXFLAGS
    key = source_module.source_hash(cxx, *flags)
    out = cache_dir() / (f"msccl_emu_tsan_{key}" if tsan else f"msccl_emu_{key}.so")
    src = KERNEL_DIR / ("tsan_driver.cpp" if tsan else "emulation.cpp")
    return cxx_build.build(src, out, cxx, flags, source_module.include_dirs(),
                           "the host emulation")


def _bind(lib: ctypes.CDLL) -> None:
    lib.msccl_emu_run.restype = ctypes.c_int
    lib.msccl_emu_run.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.c_int]
    lib.msccl_emu_error.restype = ctypes.c_char_p
    lib.msccl_emu_params.restype = ctypes.c_int
    if lib.msccl_emu_params() != packer.NPARAMS:
        raise MscclRuntimeError("the emulation library and packer.py disagree on the "
                                "parameter layout; delete " + lib._name)


def library() -> ctypes.CDLL:
    """The loaded emulation library (built if needed; one per source hash)."""
    with _lock:
        path = str(build())
        lib = _libs.get(path)
        if lib is None:
            lib = _libs[path] = cxx_build.load(Path(path), _bind)
        return lib


class _InProcess:
    """Runs the grid through ctypes on this process's memory."""

    def __init__(self):
        self.lib = library()

    def begin(self) -> None:
        pass

    def addr(self, a: np.ndarray) -> int:
        return a.ctypes.data

    def launch(self, dtype: int, op: int, params: np.ndarray, nblocks: int,
               threads: int) -> str | None:
        rc = self.lib.msccl_emu_run(dtype, op, params.ctypes.data, nblocks, threads)
        return None if rc == 0 else self.lib.msccl_emu_error().decode()


class _TsanProcess:
    """Runs the grid in the ThreadSanitizer driver; arrays travel through a launch file.

    Addresses handed out are ``(section + 1) << 40`` so table entries can be
    relocated by the driver; every array is copied back after the run. A
    TSan report is an error carrying the report.
    """

    MAGIC = 0x6d7363636c747361
    SHIFT = 40

    def __init__(self):
        self.exe = build(tsan=True)
        self.arrays: list[np.ndarray] = []
        self.index: dict[int, int] = {}

    def begin(self) -> None:
        self.arrays, self.index = [], {}

    def addr(self, a: np.ndarray) -> int:
        if not a.flags.c_contiguous:
            raise MscclRuntimeError("emulation arrays must be contiguous")
        k = self.index.get(id(a))
        if k is None:
            k = self.index[id(a)] = len(self.arrays)
            self.arrays.append(a)
        return (k + 1) << self.SHIFT

    def launch(self, dtype: int, op: int, params: np.ndarray, nblocks: int,
               threads: int) -> str | None:
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
            with open(src, "wb") as f:
                np.array([self.MAGIC, dtype, op, nblocks, threads, len(self.arrays)],
                         dtype=np.int64).tofile(f)
                params.astype(np.int64).tofile(f)
                for a in self.arrays:
                    np.array([a.nbytes], dtype=np.uint64).tofile(f)
                    f.write(a.tobytes())
            res = subprocess.run([str(self.exe), src, dst], capture_output=True, text=True, check=False)
            if "ThreadSanitizer" in res.stderr and "WARNING" in res.stderr:
                raise MscclRuntimeError("ThreadSanitizer reported a race in the emulated "
                                        f"kernel:\n{res.stderr[-6000:]}")
            if res.returncode != 0:
                return f"TSan driver exited with {res.returncode}: {res.stderr[-2000:]}"
            data = np.fromfile(dst, dtype=np.uint8)
        pos = 0
        for a in self.arrays:
            a.reshape(-1).view(np.uint8)[:] = data[pos:pos + a.nbytes]
            pos += a.nbytes
        return None


class EmulatedRuntime:
    """One algorithm's emulated device state: packed tables, FIFOs, flags, counters.

    Calls on one runtime share FIFO counters and flags (epoch-tagged), as
    consecutive kernel launches do on a GPU.
    """

    def __init__(self, alg: ir.Algorithm, buffsize: int | None = None, threads: int = 1,
                 watchdog: float = DEFAULT_WATCHDOG, tsan: bool = False):
        if threads < 1:
            raise MscclRuntimeError(f"threads per emulated block must be >= 1, got {threads}")
        self.alg = alg
        self.packed = packer.pack(alg)
        self.buffsize = buffsize
        self.threads = threads
        self.watchdog = float(watchdog)
        self.mem = _TsanProcess() if tsan else _InProcess()
        pk = self.packed
        self.flags = np.zeros(max(1, pk.nblocks), dtype=np.uint64)
        self.err = np.zeros(packer.ERR_WORDS, dtype=np.uint64)
        self.waits = np.zeros((max(1, pk.nblocks), packer.WAIT_WORDS), dtype=np.uint64)
        self.ctrl = np.zeros((max(1, pk.nconns), packer.CTRL_WORDS), dtype=np.uint64)
        self.fifo_bytes = 0
        self.fifo = np.zeros(0, dtype=np.uint8)
        self.epoch = 0

    def _fifos(self, nbytes: int) -> None:
        if nbytes > self.fifo_bytes:
            # np.zeros maps lazily: untouched slots cost no memory
            self.fifo = np.zeros(nbytes * max(1, self.packed.nconns) + 64, dtype=np.uint8)
            self.fifo_bytes = nbytes

    def reset(self) -> None:
        """Forget FIFO counters and flags (after an aborted call)."""
        self.flags[:] = 0
        self.ctrl[:] = 0
        self.err[:] = 0
        self.epoch = 0

    def run(self, inputs: list, op: str = "sum", inplace: bool | None = None,
            slice_elems: int | None = None, dtype: str | None = None) -> list[np.ndarray]:
        """Execute one call; return each rank's output (same contract as reference.run)."""
        pk, alg = self.packed, self.alg
        self.mem.begin()
        lay = calls.layout(alg, pk.plan, inputs, dtype, inplace)
        shape = packer.call_shape(alg.protocol, alg.nchunksperloop, lay.chunk_elems,
                                  lay.itemsize, self.buffsize, slice_elems)
        hd = calls.host_dtype(lay.dtype)
        n = pk.plan.ngpus
        store = []
        for r in range(n):
            bufs = []
            for b in range(3):
                a = np.empty(max(1, int(lay.storage[r, b])), dtype=hd)
                a[:] = calls.poison(lay.dtype)
                bufs.append(a)
            store.append(bufs)
        ptrs = np.zeros((n, 3), dtype=np.uint64)
        for r in range(n):
            for b in range(3):
                base, off = lay.offset(r, b)
                ptrs[r, b] = self.mem.addr(store[r][base]) + off * lay.itemsize
            base, off = lay.offset(r, 0)
            x = np.asarray(inputs[r]).reshape(-1).view(hd)
            store[r][base][off:off + x.size] = x
        if shape.call.iterations:
            self._launch(lay, shape, ptrs, op)
        outs = []
        for r in range(n):
            base, off = lay.offset(r, 1)
            out = store[r][base][off:off + int(lay.call_chunks[r, 1]) * lay.chunk_elems].copy()
            if op == "avg" and alg.collective in REDUCING:
                out = calls.divide_for_avg(out, lay.dtype, alg.ngpus)
            outs.append(out)
        return outs

    def _launch(self, lay: calls.CallLayout, shape: packer.CallShape, ptrs: np.ndarray,
                op: str) -> None:
        pk = self.packed
        self._fifos(shape.fifo_bytes)
        if self.epoch + 1 >= packer.EPOCH_LIMIT:
            self.reset()
        self.epoch += 1
        base = self.mem.addr(self.fifo)
        fifo = [base + c * self.fifo_bytes for c in range(pk.nconns)]
        ctrl0 = self.mem.addr(self.ctrl)
        ctrl = [ctrl0 + c * packer.CTRL_WORDS * 8 for c in range(pk.nconns)]
        conns = packer.conn_table(pk, fifo, ctrl, ctrl)
        if not len(conns):
            conns = np.zeros((1, packer.CONN_WORDS), dtype=np.uint64)
        steps = pk.steps if len(pk.steps) else np.zeros((1, 8), dtype=np.int32)
        deps = pk.deps if len(pk.deps) else np.zeros((1, 2), dtype=np.int32)
        keep = [np.ascontiguousarray(t) for t in (pk.blocks, steps, deps, pk.reds, ptrs, conns)]
        addrs = dict(zip(("blocks", "steps", "deps", "reds", "bufs", "conns"),
                         (self.mem.addr(t) for t in keep)))
        addrs["flags"] = self.mem.addr(self.flags)
        addrs["err"] = self.mem.addr(self.err)
        addrs["waits"] = self.mem.addr(self.waits)
        self.err[:] = 0
        self.waits[:] = 0
        params = packer.call_params(pk, shape, self.epoch, self.watchdog, addrs, pk.nblocks)
        failure = self.mem.launch(dtype_code(lay.dtype), op_code(op), params, pk.nblocks,
                                  self.threads)
        del keep
        if failure is not None:
            self.reset()
            raise MscclRuntimeError(f"{self.alg.name}: emulation failed: {failure}")
        if int(self.err[packer.ERR_ABORT]):
            err, waits = self.err.copy(), self.waits.copy()
            epoch = self.epoch
            self.reset()
            packer.raise_if_aborted(pk, err, epoch, self.watchdog, shape, waits)


#: the runtime of the last call, reused while calls repeat on one algorithm. One entry only:
#: a runtime holds its algorithm and its FIFOs, so a cache keyed by algorithm would keep
#: every algorithm ever run (and its FIFO memory) alive.
_last: dict = {}


def emulated_run(alg: ir.Algorithm, inputs: list, op: str = "sum", inplace: bool | None = None,
                 slice_elems: int | None = None, buffsize: int | None = None,
                 dtype: str | None = None, threads: int = 1,
                 watchdog: float = DEFAULT_WATCHDOG) -> list[np.ndarray]:
    """Run ``alg`` on the host emulation of the GPU kernel (reference.run's contract).

    ``dtype="bfloat16"`` takes and returns uint16 bit patterns. A wait longer
    than ``watchdog`` seconds raises :class:`~msccl_py.errors.MscclDeadlockError`
    naming rank, threadblock, step and what it waited on.
    """
    key = (id(alg), buffsize, threads, float(watchdog))
    rt = _last.get(key)
    if rt is None or rt.alg is not alg:
        _last.clear()
        rt = _last[key] = EmulatedRuntime(alg, buffsize, threads, watchdog)
    return rt.run(inputs, op, inplace, slice_elems, dtype)


#: the name the CLI's backend registry looks up (``--backend emulated``)
run = emulated_run
