"""The interpreter's C++/CUDA source: files, dtype and op codes, entry-point names.

One source tree (``kernel/``, with the headers it shares with the CPU
executors in ``runtime/include/``) serves three builds: NVRTC through
``cupy.RawModule`` (:func:`module_source`, a single self-contained string),
the nvcc compile gate (``kernel/instances.cu``) and the g++ host emulation
(``kernel/emulation.cpp``). :func:`source_hash` keys build caches.

>>> entry_name("float32", "sum", "gpu")
'msccl_interp_float32_sum_gpu'
>>> dtype_code("bfloat16"), op_code("max")
(1, 2)
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from msccl_py.errors import MscclRuntimeError
from msccl_py.plan.contract import BACKENDS
from msccl_py.plan.tables import check_op_enum
from msccl_py.runtime.include import INCLUDE_DIR

KERNEL_DIR = Path(__file__).resolve().parent / "kernel"
HEADERS = ("platform.h", "ops.h", "interp.h")
#: the headers it shares with the CPU executors: in ``INCLUDE_DIR`` (``runtime/include``)
SHARED_HEADERS = ("platform.h", "ops.h")
#: kernel dtype names, in code order (emulation.cpp's switch: the contract's table), with
#: their C++ type
DTYPES = BACKENDS["cupy"].dtypes
CTYPES = ("msccl::half_t", "msccl::bf16_t", "float", "double", "int", "long long",
          "unsigned char")
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8,
            "uint8": 1}
#: device reductions in code order; ``avg`` runs as ``sum`` and the host divides
OPS = BACKENDS["cupy"].ops
OP_STRUCTS = ("OpSum", "OpProd", "OpMax", "OpMin")
SCOPES = ("gpu", "sys")
SCOPE_STRUCTS = ("ScopeGpu", "ScopeSys")
USER_OPS = OPS + ("avg",)
#: the kernel's op codes are the IR's plus this (0 is no op)
OP_BASE = 1


def dtype_name(dtype) -> str:
    """The kernel name of a NumPy dtype (or name); bfloat16 comes as a name or ml_dtypes.

    >>> dtype_name(np.float16)
    'float16'
    """
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in DTYPES:
        raise MscclRuntimeError(f"dtype {name} is not supported by the GPU interpreter; "
                                f"supported: {', '.join(DTYPES)}")
    return name


def dtype_code(dtype) -> int:
    return DTYPES.index(dtype_name(dtype))


def op_code(op: str) -> int:
    """Device reduction code of ``op`` (avg reduces as sum)."""
    if op not in USER_OPS:
        raise MscclRuntimeError(f"reduction op {op!r} is not supported; "
                                f"supported: {', '.join(USER_OPS)}")
    return OPS.index("sum" if op == "avg" else op)


def entry_name(dtype: str, op: str, scope: str = "gpu") -> str:
    """The extern "C" name of one instantiation (see kernel/instances.cu)."""
    return f"msccl_interp_{dtype_name(dtype)}_{OPS[op_code(op)]}_{scope}"


def instance_line(dtype: str, op: str, scope: str = "gpu") -> str:
    """The ``MSCCL_INSTANCE(...)`` line that defines :func:`entry_name`'s kernel."""
    d, o, s = DTYPES.index(dtype_name(dtype)), op_code(op), SCOPES.index(scope)
    return (f"MSCCL_INSTANCE({DTYPES[d]}, {CTYPES[d]}, {OPS[o]}, {OP_STRUCTS[o]}, "
            f"{SCOPES[s]}, {SCOPE_STRUCTS[s]})")


def all_instances() -> list[tuple[str, str, str]]:
    """Every (dtype, op, scope) the kernel is built for."""
    return [(d, o, s) for s in SCOPES for d in DTYPES for o in OPS]


def read(name: str) -> str:
    """A kernel source file's text (from ``kernel/``, else the shared ``include/``); every
    build reads interp.h here, so its op enum is checked against the IR's numbering (from
    :data:`OP_BASE`) before any build."""
    path = (INCLUDE_DIR if name in SHARED_HEADERS else KERNEL_DIR) / name
    try:
        text = path.read_text()
    except OSError as exc:
        raise MscclRuntimeError(f"kernel source {path} is missing: {exc}") from exc
    if name == "interp.h":
        check_op_enum(text, OP_BASE, str(path))
    return text


def include_dirs() -> tuple[Path, Path]:
    """The kernel builds' ``-I`` folders: its own, then the headers shared with the CPU
    executors."""
    return KERNEL_DIR, INCLUDE_DIR


_LOCAL_INCLUDE = re.compile(r'^#include "([^"]+)"\s*$', re.MULTILINE)


def _inline(name: str, seen: set[str]) -> str:
    if name in seen:
        return ""
    seen.add(name)
    text = read(name).replace("#pragma once\n", "")
    return _LOCAL_INCLUDE.sub(lambda m: _inline(m.group(1), seen), text)


def module_source(instances: list[tuple[str, str, str]]) -> str:
    """One self-contained CUDA source defining the given instantiations (for NVRTC).

    >>> module_source([("int32", "min", "sys")]).splitlines()[-1]
    'MSCCL_INSTANCE(int32, int, min, OpMin, sys, ScopeSys)'
    """
    body = _inline("instances.cu", set())
    lines = "\n".join(instance_line(*i) for i in instances)
    return f"#define MSCCL_NO_DEFAULT_INSTANCES\n{body}\n{lines}\n"


def fp16_include_dirs() -> list[str]:
    """Directories holding cuda_fp16.h and cuda_bf16.h, for NVRTC builds that need them.

    CuPy normally passes its own include path; this is the fallback: the
    CUDA toolkit, then the ``nvidia-*`` wheels' include folders.
    """
    import glob
    import os
    import sysconfig
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    cands = [os.path.join(r, "include") for r in roots if r]
    site = sysconfig.get_paths()["purelib"]
    cands += sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))
    out = []
    for d in cands:
        if (os.path.isfile(os.path.join(d, "cuda_fp16.h"))
                and os.path.isfile(os.path.join(d, "cuda_bf16.h")) and d not in out):
            out.append(d)
    return out


def source_hash(*extra: str) -> str:
    """Hash of every kernel source file (and ``extra`` strings such as flags)."""
    h = hashlib.sha256()
    for name in HEADERS + ("instances.cu", "emulation.cpp", "tsan_driver.cpp"):
        h.update(name.encode())
        h.update(read(name).encode())
    for e in extra:
        h.update(e.encode())
    return h.hexdigest()[:16]
