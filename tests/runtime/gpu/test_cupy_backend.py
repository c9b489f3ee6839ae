"""The CuPy backend's Python, run against a fake CuPy whose kernels are the host emulation.

This checks placements, table and FIFO setup, co-residency decisions,
deadlock reporting and the host fallback's ordering without a GPU; real
device behaviour is for benchmarks/device_check.py on a GPU machine.
"""

from __future__ import annotations

import sys

import fake_cupy
import numpy as np
import pytest
from gpu_runtime_algos import (
    fifo_deadlock_xml,
    gather_reduce,
    int_inputs,
    needs_gxx,
    ring_allreduce,
    same,
)

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.runtime import reference
from msccl_py.runtime.cupy import backend, device, host
from msccl_py.plan.tables import plan_for
from msccl_py.targets.msccl import read_xml


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        mod = fake_cupy.make(**kw)
        monkeypatch.setitem(sys.modules, "cupy", mod)
        monkeypatch.setattr(device, "_kernels", {})
        fake_cupy.RawModule.fail_cooperative = False
        fake_cupy.RawModule.made = []
        return mod
    yield install
    fake_cupy.RawModule.fail_cooperative = False


def test_without_cupy_the_backend_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    alg = ring_allreduce(2)
    with pytest.raises(MscclRuntimeError) as exc:
        backend.run(alg, int_inputs(alg, 4, np.float32))
    msg = str(exc.value)
    assert "cupy backend is unavailable" in msg and "msccl-py[cuda12]" in msg
    assert "\n" not in msg
    with pytest.raises(MscclRuntimeError, match="unavailable"):
        backend.run(alg, int_inputs(alg, 4, np.float32), placement="host")
    from msccl_py.runtime import cupy as gpu
    assert "CuPy is not installed" in gpu.available()


def test_cli_cupy_backend_without_cupy(monkeypatch, capsys, tmp_path):
    from msccl_py.cli import main
    monkeypatch.setitem(sys.modules, "cupy", None)
    path = tmp_path / "dl.xml"
    path.write_text(fifo_deadlock_xml())
    from msccl_py.cli import run as cli_run
    if "cupy" not in getattr(cli_run, "BACKENDS", {}):
        pytest.skip("the run command has no cupy backend registered")
    alg = ring_allreduce(2)
    from msccl_py.targets.msccl import write_xml
    path.write_text(write_xml(alg))
    assert main(["run", str(path), "--backend", "cupy", "--bytes", "4KiB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the cupy backend is unavailable")


@needs_gxx
@pytest.mark.parametrize("make_alg", [lambda: ring_allreduce(4), lambda: gather_reduce(4),
                                      lambda: ring_allreduce(3, "LL128", channels=2)])
def test_one_gpu_placement_matches_reference(fake, make_alg):
    fake()
    alg = make_alg()
    for op in ("sum", "max"):
        ins = int_inputs(alg, 40, np.float32, op)
        out = backend.run(alg, ins, op, slice_elems=16)
        assert same(out, reference.run(alg, ins, op, slice_elems=16))
    k = device._kernels[("float32", "max", "gpu", 0, True)]
    assert k.cooperative
    assert k.function.launches[-1] == ((plan_for(alg).nblocks,), (512,))


@needs_gxx
def test_block_size_shrinks_to_fit_and_oversized_plans_fail_clearly(fake):
    fake(sms=2, blocks_per_sm=2)           # holds 4 blocks at 512 threads, 16 at 128
    alg = ring_allreduce(3, channels=2)    # 6 blocks
    ins = int_inputs(alg, 20, np.float32)
    assert same(backend.run(alg, ins), reference.run(alg, ins))
    (k,) = device._kernels.values()
    assert k.function.launches[-1][1] == (256,)
    big = ring_allreduce(6, channels=3)    # 18 blocks
    with pytest.raises(MscclRuntimeError, match="plan needs 18 co-resident blocks on device 0; "
                                                "the device holds 16 at 128 threads"):
        backend.run(big, int_inputs(big, 8, np.float32))


@needs_gxx
def test_falls_back_to_a_plain_launch_without_cooperative_modules(fake):
    fake()
    fake_cupy.RawModule.fail_cooperative = True
    alg = ring_allreduce(3)
    ins = int_inputs(alg, 9, np.int32)
    assert same(backend.run(alg, ins, "sum"), reference.run(alg, ins, "sum"))
    assert not next(iter(device._kernels.values())).cooperative


@needs_gxx
def test_devices_placement_one_launch_per_rank(fake):
    fake(ndev=4)
    alg = ring_allreduce(4, channels=2)
    ins = int_inputs(alg, 30, np.float64)
    out = backend.run(alg, ins, placement="devices", slice_elems=8)
    assert same(out, reference.run(alg, ins, slice_elems=8))
    rt = backend.runtime(alg, "devices", buffsize=None, watchdog=backend.DEFAULT_WATCHDOG,
                         threads=None, devices=None)
    assert rt.scope == "sys" and [g.nblocks for g in rt.groups] == [2, 2, 2, 2]
    with pytest.raises(MscclRuntimeError, match="needs 8 distinct devices"):
        backend.run(ring_allreduce(8), int_inputs(ring_allreduce(8), 2, np.float32),
                    placement="devices")


@needs_gxx
def test_deadlock_is_reported_and_the_runtime_recovers(fake):
    fake()
    alg = read_xml(fifo_deadlock_xml())
    with pytest.raises(MscclDeadlockError, match="threadblock 0 step 0 \\(s\\).*FIFO room"):
        backend.run(alg, int_inputs(alg, 64, np.float32), slice_elems=16, watchdog=0.3)
    small = int_inputs(alg, 4, np.float32)
    out = backend.run(alg, small, slice_elems=16, watchdog=0.3)
    np.testing.assert_array_equal(out[0], small[1])


@needs_gxx
def test_bfloat16_and_avg_on_the_device_path(fake):
    from msccl_py.runtime.cupy import calls
    fake()
    alg = ring_allreduce(4)
    ins = int_inputs(alg, 16, np.float32)
    bits = [calls.to_bf16_bits(x) for x in ins]
    out = backend.run(alg, bits, "avg", dtype="bfloat16")
    want = reference.run(alg, ins, "avg")
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o, calls.to_bf16_bits(w))


def test_host_fallback_matches_reference(fake):
    fake()
    for alg in (ring_allreduce(4), gather_reduce(4), ring_allreduce(3, channels=2)):
        for op in ("sum", "prod"):
            ins = int_inputs(alg, 12, np.float32, op)
            out = backend.run(alg, ins, op, placement="host")
            assert same(out, reference.run(alg, ins, op))


def test_host_fallback_rejects_cycles_and_bfloat16(fake):
    fake()
    tb0 = ir.Threadblock(0, recv_peer=1, steps=[
        ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0), has_dependents=True)])
    tb1 = ir.Threadblock(1, send_peer=1, steps=[
        ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0), depends=[(0, 0)])])
    peer = ir.Threadblock(0, send_peer=0, recv_peer=0, steps=[
        ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0)),
        ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
    alg = ir.Algorithm("wait_cycle", "custom", "Simple", False, 2, 1, 1,
                       [ir.Gpu(0, 1, 1, 0, [tb0, tb1]), ir.Gpu(1, 1, 1, 0, [peer])])
    with pytest.raises(MscclDeadlockError, match="on a cycle"):
        host.order_steps(plan_for(alg))
    ring = ring_allreduce(2)
    with pytest.raises(MscclRuntimeError, match="no bfloat16"):
        backend.run(ring, [np.zeros(2, np.uint16)] * 2, dtype="bfloat16", placement="host")


def test_unknown_placement(fake):
    fake()
    with pytest.raises(MscclRuntimeError, match="unknown placement 'moon'"):
        backend.run(ring_allreduce(2), int_inputs(ring_allreduce(2), 2, np.float32),
                    placement="moon")
