"""The interpreter compiles with nvcc for sm_90 within its register budget, no spills."""

from __future__ import annotations

import pytest

from msccl_py.runtime.cupy import nvcc_gate
from msccl_py.runtime.cupy.kernel_source import all_instances, entry_name

needs_nvcc = pytest.mark.skipif(nvcc_gate.nvcc() is None, reason="nvcc is not installed")


@needs_nvcc
@pytest.mark.slow  # a full nvcc build (20 s); the runtime tests cover the same source on the host
def test_every_instantiation_builds_clean_in_one_invocation():
    res, seconds = nvcc_gate.build()
    names = {entry_name(*i) for i in all_instances()}
    assert names <= set(res), f"missing entry points: {sorted(names - set(res))[:5]}"
    assert len(names) == 7 * 4 * 2
    dirty = [r for n, r in res.items() if n in names and not r.clean]
    assert not dirty, f"over budget or spilling: {dirty[:3]}"
    for n in names:
        assert 0 < res[n].registers <= nvcc_gate.MAX_REGISTERS
        # steps table (8 KiB) plus block state must stay small enough for 2+ blocks per SM
        assert 8192 < res[n].smem_bytes < 12 * 1024
    print(f"nvcc sm_90 build of {len(names)} instantiations: {seconds:.1f} s, registers "
          f"{min(res[n].registers for n in names)}..{max(res[n].registers for n in names)}")


@needs_nvcc
def test_gate_reports_ptxas_failure_clearly(monkeypatch, tmp_path):
    monkeypatch.setattr(nvcc_gate, "instance_line", lambda *a: "this is not C++;")
    with pytest.raises(nvcc_gate.MscclRuntimeError, match="nvcc failed"):
        nvcc_gate.build([("float32", "sum", "gpu")])


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("inst", all_instances(), ids=lambda i: "-".join(i))
def test_each_instantiation_alone(inst):
    res, _ = nvcc_gate.build([inst])
    r = res[entry_name(*inst)]
    assert r.clean, r


@pytest.mark.skipif(nvcc_gate.nvrtc_library() is None, reason="libnvrtc is not installed "
                    "(pip install nvidia-cuda-nvrtc)")
def test_nvrtc_builds_the_module_source_cupy_compiles():
    from msccl_py.runtime.cupy.kernel_source import (
        DTYPES,
        OPS,
        fp16_include_dirs,
        module_source,
    )
    insts = [(d, "sum", "gpu") for d in DTYPES] + [("float32", o, "sys") for o in OPS]
    inc = fp16_include_dirs()
    if not inc:
        pytest.skip("no cuda_fp16.h/cuda_bf16.h to include")
    res, seconds = nvcc_gate.nvrtc_build(module_source(insts),
                                         options=("-std=c++17", f"-I{inc[0]}"))
    for i in insts:
        r = res[entry_name(*i)]
        assert r.clean, r
    print(f"NVRTC build of {len(insts)} instantiations: {seconds:.1f} s")


def test_nvrtc_reports_compile_errors():
    if nvcc_gate.nvrtc_library() is None:
        pytest.skip("libnvrtc is not installed")
    with pytest.raises(nvcc_gate.MscclRuntimeError, match="NVRTC failed"):
        nvcc_gate.nvrtc_build("this is not CUDA;")
