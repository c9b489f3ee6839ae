"""The interpreter compiles with nvcc for sm_90 within its register budget, no spills."""

from __future__ import annotations

import pytest

from msccl_py.runtime.cupy import nvcc_gate
from msccl_py.runtime.cupy.source import all_instances, entry_name

pytestmark = pytest.mark.skipif(nvcc_gate.nvcc() is None, reason="nvcc is not installed")


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


def test_gate_reports_ptxas_failure_clearly(monkeypatch, tmp_path):
    monkeypatch.setattr(nvcc_gate, "instance_line", lambda *a: "this is not C++;")
    with pytest.raises(nvcc_gate.MscclRuntimeError, match="nvcc failed"):
        nvcc_gate.build([("float32", "sum", "gpu")])


@pytest.mark.slow
@pytest.mark.parametrize("inst", all_instances(), ids=lambda i: "-".join(i))
def test_each_instantiation_alone(inst):
    res, _ = nvcc_gate.build([inst])
    r = res[entry_name(*inst)]
    assert r.clean, r
