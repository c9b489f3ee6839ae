"""The nvcc compile gate: build the interpreter for a GPU arch and report its resources.

``ptxas -v`` prints, per entry point, registers, stack frame and spill
bytes; the kernel is launched with ``__launch_bounds__(512, 2)`` and must
stay within :data:`MAX_REGISTERS` with no spills, or co-residency and
speed suffer. Used by the tests (no GPU needed, only nvcc) and by
``benchmarks/device_check.py``.

>>> r = parse_ptxas('''ptxas info    : Compiling entry function 'k' for 'sm_90'
... ptxas info    : Function properties for k
...     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
... ptxas info    : Used 40 registers, used 1 barriers, 8448 bytes smem''')
>>> r["k"].registers, r["k"].spill_stores
(40, 0)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.cupy.kernel_source import KERNEL_DIR, include_dirs, instance_line

MAX_REGISTERS = 64
DEFAULT_ARCH = "sm_90"


@dataclass
class Resources:
    """ptxas figures of one entry point."""

    name: str
    registers: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem_bytes: int = 0

    @property
    def clean(self) -> bool:
        """Within the register budget with no spills and no stack."""
        return (self.registers <= MAX_REGISTERS and self.spill_stores == 0
                and self.spill_loads == 0 and self.stack_bytes == 0)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, Resources]:
    """Entry point -> :class:`Resources` from ``ptxas -v`` output."""
    out: dict[str, Resources] = {}
    current = None
    for line in text.splitlines():
        m = _ENTRY.search(line) or _PROPS.search(line)
        if m:
            current = out.setdefault(m.group(1), Resources(m.group(1)))
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        m = _USED.search(line)
        if m:
            current.registers = int(m.group(1))
            s = _SMEM.search(line)
            current.smem_bytes = int(s.group(1)) if s else 0
    return out


def nvcc() -> str | None:
    """Path of nvcc ($NVCC, PATH, or $CUDA_HOME/bin), None when absent."""
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.exists(cand):
            return cand
    return None


def build(instances: list[tuple[str, str, str]] | None = None,
          arch: str = DEFAULT_ARCH) -> tuple[dict[str, Resources], float]:
    """Compile the kernel with nvcc in one invocation; (resources by entry, seconds).

    ``instances`` None builds every dtype x op x scope (kernel/instances.cu).
    Raises MscclRuntimeError with nvcc's output when it fails.
    """
    exe = nvcc()
    if exe is None:
        raise MscclRuntimeError("nvcc was not found (set NVCC or CUDA_HOME)")
    with tempfile.TemporaryDirectory() as tmp:
        if instances is None:
            src = str(KERNEL_DIR / "instances.cu")
        else:
            src = os.path.join(tmp, "some.cu")
            with open(src, "w") as f:
                f.write('#define MSCCL_NO_DEFAULT_INSTANCES\n#include "instances.cu"\n')
                f.write("\n".join(instance_line(*i) for i in instances) + "\n")
        includes = [a for d in include_dirs() for a in ("-I", str(d))]
        cmd = [exe, "-std=c++17", f"-arch={arch}", "-cubin", "-Xptxas", "-v", *includes, "-o",
               os.path.join(tmp, "interp.cubin"), src]
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        raise MscclRuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{res.stderr[-4000:]}")
    return parse_ptxas(res.stderr + res.stdout), elapsed


def nvrtc_library() -> str | None:
    """Path of libnvrtc (the ``nvidia-cuda-nvrtc`` wheel or the CUDA toolkit), None if absent."""
    import glob
    import sysconfig
    roots = [os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib"),
             os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "cuda_nvrtc", "lib"),
             os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64")]
    for root in roots:
        hits = sorted(p for p in glob.glob(os.path.join(root, "libnvrtc.so*"))
                      if ".alt." not in p)
        if hits:
            return hits[0]
    return None


def nvrtc_build(source: str, arch: str = DEFAULT_ARCH,
                options: tuple[str, ...] = ("-std=c++17",)) -> tuple[dict[str, Resources], float]:
    """Compile ``source`` (e.g. :func:`~msccl_py.runtime.cupy.kernel_source.module_source`) with
    NVRTC to a cubin, as ``cupy.RawModule`` would; (resources, seconds).

    Raises MscclRuntimeError with NVRTC's log when the source does not compile.
    """
    import ctypes
    path = nvrtc_library()
    if path is None:
        raise MscclRuntimeError("libnvrtc was not found (pip install nvidia-cuda-nvrtc)")
    import glob
    for builtins in glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*")):
        if ".alt." not in builtins:   # NVRTC dlopens it by name: load it first
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"interp.cu", 0, None, None):
        raise MscclRuntimeError("nvrtcCreateProgram failed")
    opts = [o.encode() for o in (*options, f"-arch={arch}", "--ptxas-options=-v")]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    t0 = time.perf_counter()
    rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
    elapsed = time.perf_counter() - t0
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    text = log.value.decode(errors="replace")
    if rc != 0:
        raise MscclRuntimeError(f"NVRTC failed to compile the interpreter:\n{text[-4000:]}")
    return parse_ptxas(text), elapsed
