"""A stand-in for the parts of CuPy the GPU backend uses, running kernels on the emulation.

Arrays are NumPy arrays whose ``.data.ptr`` is their host address, streams
and events complete at once, and a RawModule's kernels call the host
emulation library with the same parameter vector the device would get. This
lets the backend's Python (tables, placements, launches, error paths) run on
machines without a GPU; it says nothing about device behaviour.
"""

from __future__ import annotations

import re
import sys
import threading
import types
from typing import ClassVar

import numpy as np

from msccl_py.runtime.cupy import emulation, kernel_source as source


class _Data:
    def __init__(self, arr):
        self.ptr = arr.__array_interface__["data"][0]


class ndarray(np.ndarray):
    """NumPy array with CuPy's ``.data.ptr`` and ``.get()``."""

    @property
    def data(self):
        return _Data(self)

    def get(self):
        return np.array(self)


def _wrap(a) -> ndarray:
    return np.asarray(a).view(ndarray)


def zeros(shape, dtype=float):
    return _wrap(np.zeros(shape, dtype))


def empty(shape, dtype=float):
    return _wrap(np.empty(shape, dtype))


def asarray(a, dtype=None):
    return _wrap(np.array(a, dtype=dtype, copy=True)) if not isinstance(a, ndarray) else a


def asnumpy(a):
    return np.array(a)


def full(shape, value, dtype=None):
    return _wrap(np.full(shape, value, dtype))


for _name in ("add", "multiply", "maximum", "minimum", "sign", "abs"):
    setattr(sys.modules[__name__], _name, getattr(np, _name))
uint8, uint64, int32, float32 = np.uint8, np.uint64, np.int32, np.float32


class _Ctx:
    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


#: launches in flight (kernels run asynchronously, as on a device)
_running: list[threading.Thread] = []
_streams: list = []


def _sync_all():
    for t in _running:
        t.join()
    _running.clear()


class Stream(_Ctx):
    def __init__(self, *a, **k):
        self.pending: list[threading.Thread] = []

    def __enter__(self):
        _streams.append(self)
        return self

    def __exit__(self, *exc):
        _streams.pop()
        return False

    def wait_event(self, ev):
        pass

    def synchronize(self):
        for t in self.pending:
            t.join()


class Event:
    def __init__(self, *a, **k):
        self.threads: list[threading.Thread] = []

    def record(self, stream=None):
        self.threads = list(stream.pending) if stream is not None else list(_running)

    @property
    def done(self):
        return not any(t.is_alive() for t in self.threads)

    def synchronize(self):
        for t in self.threads:
            t.join()


class _Function:
    ptr = 1


class RawKernel:
    num_regs, local_size_bytes, shared_size_bytes, max_threads_per_block = 62, 0, 8448, 512

    def __init__(self, name, cooperative):
        m = re.fullmatch(r"msccl_interp_(\w+?)_(sum|prod|max|min)_(gpu|sys)", name)
        self.dtype, self.op = m.group(1), m.group(2)
        self.kernel = _Function()
        self.launches = []

    def __call__(self, grid, block, args, **kw):
        (params,) = args
        lib = emulation.library()
        self.launches.append((grid, block))
        code = (source.dtype_code(self.dtype), source.op_code(self.op), params.data.ptr, grid[0])

        def body():
            if lib.msccl_emu_run(*code, 1):
                raise RuntimeError(lib.msccl_emu_error().decode())
        t = threading.Thread(target=body, daemon=True)
        t.start()
        _running.append(t)
        if _streams:
            _streams[-1].pending.append(t)


class _NoopKernel:
    """Any non-interpreter kernel (device_check's copy baselines): does nothing."""

    def __call__(self, grid, block, args, **kw):
        pass


class _Pool:
    def free_all_blocks(self):
        pass


def get_default_memory_pool():
    return _Pool()


def ones(shape, dtype=float):
    return _wrap(np.ones(shape, dtype))


def copyto(dst, src):
    np.copyto(dst, src)


class RawModule:
    fail_cooperative = False
    made: ClassVar[list] = []

    def __init__(self, code=None, options=(), enable_cooperative_groups=False, **kw):
        if enable_cooperative_groups and RawModule.fail_cooperative:
            raise RuntimeError("cudadevrt not found")
        self.code = code
        self.coop = enable_cooperative_groups
        RawModule.made.append(self)

    def get_function(self, name):
        if "MSCCL_INSTANCE" not in (self.code or ""):
            return _NoopKernel()
        made = {"msccl_interp_{}_{}_{}".format(*(x.strip() for x in m.split(",")[0:5:2]))
                for m in re.findall(r"^MSCCL_INSTANCE\(([^)]*)\)$", self.code, re.MULTILINE)}
        if name not in made:
            raise RuntimeError(f"no kernel {name} in the module (has {sorted(made)})")
        return RawKernel(name, self.coop)


class _SharedHeap:
    """'Device memory' shared by forked processes: one anonymous shared mapping made
    before the fork, so every process sees it at the same address; IPC handles
    are offsets into it."""

    def __init__(self, nbytes: int = 1 << 30):
        import ctypes
        import mmap
        import multiprocessing as mp
        self.map = mmap.mmap(-1, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.size = nbytes
        self.next = mp.get_context("fork").Value("q", 4096)

    def malloc(self, n: int) -> int:
        with self.next.get_lock():
            off = self.next.value
            self.next.value = off + (n + 4095) // 4096 * 4096
        if off + n > self.size:
            raise MemoryError("fake device heap exhausted")
        return self.base + off

    def memset(self, ptr: int, value: int, n: int) -> None:
        import ctypes
        ctypes.memset(ptr, value, n)

    def handle(self, ptr: int) -> bytes:
        return (ptr - self.base).to_bytes(64, "little")

    def open(self, handle: bytes) -> int:
        return self.base + int.from_bytes(bytes(handle)[:8], "little")


def make(ndev: int = 1, blocks_per_sm: int = 2, sms: int = 132,
         ipc: bool = False) -> types.ModuleType:
    """A fresh fake ``cupy`` module with ``ndev`` devices (``ipc``: a fork-shared heap)."""
    mod = types.ModuleType("cupy")
    for k, v in dict(globals()).items():
        if not k.startswith("__"):
            setattr(mod, k, v)
    state = {"dev": 0}
    rt = types.SimpleNamespace(
        getDeviceCount=lambda: ndev, getDevice=lambda: state["dev"],
        getDeviceProperties=lambda d: {"multiProcessorCount": sms, "name": b"FakeGPU",
                                       "l2CacheSize": 1 << 20},
        deviceSynchronize=_sync_all, deviceCanAccessPeer=lambda a, b: 1,
        deviceEnablePeerAccess=lambda b: None, runtimeGetVersion=lambda: 13000,
        driverGetVersion=lambda: 13000)
    if ipc:
        heap = _SharedHeap()
        rt.malloc, rt.free, rt.memset = heap.malloc, lambda p: None, heap.memset
        rt.ipcGetMemHandle, rt.ipcOpenMemHandle = heap.handle, heap.open
        rt.ipcCloseMemHandle = lambda p: None
    drv = types.SimpleNamespace(
        occupancyMaxActiveBlocksPerMultiprocessor=lambda f, t, s: blocks_per_sm * 512 // t)

    class Device(_Ctx):
        def __init__(self, d=0):
            self.d = d
            self.prev = None

        def __enter__(self):
            self.prev, state["dev"] = state["dev"], self.d
            return self

        def __exit__(self, *exc):
            state["dev"] = self.prev
            return False

        def use(self):
            state["dev"] = self.d

    mod.cuda = types.SimpleNamespace(runtime=rt, driver=drv, Device=Device, Stream=Stream,
                                     Event=Event, get_elapsed_time=lambda a, b: 1.0)
    mod.__version__ = "fake"
    return mod
