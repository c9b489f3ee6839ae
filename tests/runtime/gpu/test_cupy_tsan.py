"""ThreadSanitizer run of the emulated kernel: its acquire/release protocol is race-free.

x86 is TSO, so a missing release would go unnoticed by the plain emulation;
TSan models the C++ memory model and flags it. The second test plants such
a bug to show the run can fail.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from gpu_runtime_algos import gather_reduce, int_inputs, needs_gxx, ring_allreduce, same

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime import reference
from msccl_py.runtime.cupy import emulation
from msccl_py.runtime.cupy.emulation import EmulatedRuntime

pytestmark = [needs_gxx, pytest.mark.slow]


def test_tsan_clean_on_ring_and_fused_reduce():
    for alg in (ring_allreduce(4), gather_reduce(4), ring_allreduce(3, "LL", channels=2)):
        rt = EmulatedRuntime(alg, threads=2, tsan=True, watchdog=60)
        for seed in range(2):              # the second call reuses FIFO counters and flags
            ins = int_inputs(alg, 37, np.float32, seed=seed)
            assert same(rt.run(ins, slice_elems=8), reference.run(alg, ins, slice_elems=8))


def test_tsan_catches_a_missing_release(monkeypatch, tmp_path):
    include = tmp_path / "include"
    shutil.copytree(emulation.source_module.INCLUDE_DIR, include)
    plat = include / "platform.h"
    text = plat.read_text()
    # the host post(): FIFO tails/heads and flags published without release
    release = "store(v, std::memory_order_release);\n  emu::progress"
    broken = text.replace(release, release.replace("release", "relaxed"))
    assert broken != text
    plat.write_text(broken)
    monkeypatch.setenv("MSCCL_PY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(emulation.source_module, "INCLUDE_DIR", include)
    alg = ring_allreduce(3)
    rt = EmulatedRuntime(alg, threads=2, tsan=True, watchdog=60)
    with pytest.raises(MscclRuntimeError, match="ThreadSanitizer reported a race"):
        rt.run(int_inputs(alg, 64, np.float32), slice_elems=16)
