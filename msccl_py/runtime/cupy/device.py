"""CuPy access for the GPU runtime: availability, kernel builds, occupancy, launches.

Everything that touches CuPy goes through here, imported lazily, so the rest
of the package (and ``import msccl_py``) never needs it. Missing CuPy or a
missing GPU is one :class:`~msccl_py.errors.MscclRuntimeError` line.

>>> unavailable_reason() is None or isinstance(unavailable_reason(), str)
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.runtime.cupy.kernel_source import entry_name, fp16_include_dirs, module_source

#: block sizes tried for co-residency, largest first
THREAD_CHOICES = (512, 256, 128)
#: blocks left free per device for other work (0: the plan may use them all)
RESERVE_BLOCKS = 0
#: host-side grace after the device watchdog before a launch counts as hung
HOST_GRACE = 5.0


def unavailable_reason() -> str | None:
    """None when CuPy imports and sees a GPU, else a one-line reason."""
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001 - ImportError or a broken CUDA install
        return (f"CuPy is not installed ({type(exc).__name__}: {exc}); install "
                "msccl-py[cuda12] or msccl-py[cuda13]")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError when no driver/device
        return f"CuPy cannot reach a GPU: {exc}"
    if n < 1:
        return "CuPy sees no GPU"
    return None


def require_cupy():
    """The cupy module, or MscclRuntimeError saying why the GPU backend cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        raise MscclRuntimeError(f"the cupy backend is unavailable: {reason}")
    import cupy
    return cupy


@dataclass
class Kernel:
    """One compiled interpreter instantiation on one device."""

    name: str
    function: object          # cupy.RawKernel
    cooperative: bool
    device: int
    note: str = ""            # why the cooperative build failed, when it did
    build_s: float = 0.0

    def attributes(self) -> dict:
        f = self.function
        return {"registers": int(f.num_regs), "local_bytes": int(f.local_size_bytes),
                "shared_bytes": int(f.shared_size_bytes),
                "max_threads": int(f.max_threads_per_block)}


_kernels: dict[tuple, Kernel] = {}


def kernel(dtype: str, op: str, scope: str, device: int | None = None,
           cooperative: bool = True) -> Kernel:
    """The compiled interpreter for (dtype, op, scope) on ``device``, built through NVRTC.

    Tries a cooperative module first; when CuPy cannot build one (it may need
    cudadevrt), falls back to a plain launch, which is safe because
    :func:`fit_threads` has checked co-residency.
    """
    cp = require_cupy()
    dev = cp.cuda.runtime.getDevice() if device is None else device
    key = (dtype, op, scope, dev, cooperative)
    k = _kernels.get(key)
    if k is not None:
        return k
    k = None
    name = entry_name(dtype, op, scope)
    code = module_source([(dtype, op, scope)])
    # CuPy's defaults first (its include path normally has cuda_fp16.h and NVRTC defaults
    # to C++17), then an explicit dialect, then the toolkit's / wheels' headers
    incs = [f"-I{d}" for d in fp16_include_dirs()]
    option_sets = [(), ("-std=c++17",)] + [(i,) for i in incs] + [("-std=c++17", i) for i in incs]
    errors = []
    t0 = time.perf_counter()
    with cp.cuda.Device(dev):
        for options in option_sets:
            for coop in ((True, False) if cooperative else (False,)):
                try:
                    mod = cp.RawModule(code=code, options=options,
                                       enable_cooperative_groups=coop)
                    fn = mod.get_function(name)
                    _ = fn.kernel  # compiles and loads the module now, so errors show here
                    k = Kernel(name, fn, coop, dev, " | ".join(errors),
                               time.perf_counter() - t0)
                    break
                except Exception as exc:  # noqa: BLE001 - CompileException / CUDADriverError
                    errors.append(f"{'cooperative' if coop else 'plain'} {options}: {exc}")
                    if "cuda_fp16.h" in str(exc) or "cuda_bf16.h" in str(exc):
                        break  # a header problem: try the next include path
            if k is not None:
                break
    if k is None:
        raise MscclRuntimeError(f"building kernel {name} failed: " + " | ".join(
            e.splitlines()[0] if e else e for e in errors))
    _kernels[key] = k
    return k


def device_blocks(k: Kernel, threads: int) -> int:
    """How many blocks of ``threads`` threads can be resident at once on k's device."""
    cp = require_cupy()
    per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        k.function.kernel.ptr, threads, 0)
    sms = cp.cuda.runtime.getDeviceProperties(k.device)["multiProcessorCount"]
    return int(per_sm) * int(sms)


def fit_threads(k: Kernel, nblocks: int, threads: int | None = None) -> int:
    """The largest block size at which all ``nblocks`` blocks are co-resident.

    The kernel spins on other blocks, so a grid that does not fit would hang;
    this raises instead, saying how many blocks fit.
    """
    choices = (threads,) if threads else THREAD_CHOICES
    fits = {}
    for t in choices:
        fits[t] = device_blocks(k, t) - RESERVE_BLOCKS
        if fits[t] >= nblocks:
            return t
    t = min(choices)
    raise MscclRuntimeError(
        f"plan needs {nblocks} co-resident blocks on device {k.device}; the device holds "
        f"{max(0, fits[t])} at {t} threads per block; use fewer instances, more devices "
        "(placement='devices') or placement='host'")


def launch(k: Kernel, nblocks: int, threads: int, params, stream) -> None:
    """Start the interpreter grid on ``stream`` (cooperatively when the module allows)."""
    with stream:
        k.function((nblocks,), (threads,), (params,))


def wait(events: list, deadline_s: float, what: str) -> None:
    """Wait for every event, or raise MscclDeadlockError once ``deadline_s`` has passed.

    The device watchdog normally ends a stuck grid first; reaching this
    deadline means a kernel is still running and the device may need a reset.
    """
    end = time.monotonic() + deadline_s
    pending = list(events)
    while pending:
        pending = [e for e in pending if not e.done]
        if not pending:
            return
        if time.monotonic() > end:
            raise MscclDeadlockError(
                f"{what}: the GPU kernel did not finish within {deadline_s:g} s even though "
                "the device watchdog should have stopped it; the GPU may need a reset")
        time.sleep(1e-4)
