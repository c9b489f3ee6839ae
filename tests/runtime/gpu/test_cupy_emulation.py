"""The host-emulation build of the GPU kernel against the NumPy reference runtime."""

from __future__ import annotations

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
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError, SizeError
from msccl_py.runtime import reference
from msccl_py.runtime.cupy import calls, emulation
from msccl_py.runtime.cupy.emulation import EmulatedRuntime, emulated_run
from msccl_py.runtime.expected import expected
from msccl_py.targets.msccl import read_xml

pytestmark = needs_gxx

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint8"]
OPS = ["sum", "prod", "max", "min", "avg"]


def check_against_oracles(alg, ins, op="sum", **kw):
    out = emulated_run(alg, ins, op, **kw)
    ref = reference.run(alg, ins, op, **{k: v for k, v in kw.items() if k != "threads"})
    assert same(out, ref)
    for o, e in zip(out, expected(alg, ins, op)):
        if e is not None:
            np.testing.assert_array_equal(o, e)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_ring_allreduce_every_dtype_and_op(dtype, op):
    alg = ring_allreduce(4)
    ins = int_inputs(alg, 24, dtype, op, seed=hash((dtype, op)) % 1000)
    check_against_oracles(alg, ins, op, slice_elems=8)


@pytest.mark.parametrize("op", OPS)
def test_bfloat16_matches_float32_reference(op):
    alg = ring_allreduce(4, "LL")
    ins = int_inputs(alg, 32, np.float32, op)
    bits = [calls.to_bf16_bits(x) for x in ins]
    out = emulated_run(alg, bits, op, dtype="bfloat16", slice_elems=16)
    want = reference.run(alg, ins, op, slice_elems=16)
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o, calls.to_bf16_bits(w))


@pytest.mark.parametrize("protocol", ["Simple", "LL", "LL128"])
@pytest.mark.parametrize("chunk_elems,slice_elems", [
    (16, None),     # one iteration, whole chunks per transfer
    (100, 16),      # many iterations with a ragged last one
    (3, None),      # S * 4 bytes is not 16-byte aligned: element-wise fallback
    (37, 8),        # misaligned and ragged
])
def test_pipelining_and_alignment(protocol, chunk_elems, slice_elems):
    alg = ring_allreduce(5, protocol, channels=2)
    ins = int_inputs(alg, chunk_elems, np.float32)
    check_against_oracles(alg, ins, slice_elems=slice_elems)


def test_fused_multi_source_reduce_and_dependencies():
    alg = gather_reduce(5)
    for op in ("sum", "max", "prod"):
        ins = int_inputs(alg, 40, np.int64, op)
        out = check_against_oracles(alg, ins, op, slice_elems=16)
        assert out[0].dtype == np.int64


def test_two_threads_per_block_use_the_barriers():
    alg = ring_allreduce(4)
    ins = int_inputs(alg, 50, np.float32)
    check_against_oracles(alg, ins, slice_elems=16, threads=2)


def test_counters_and_flags_persist_across_calls():
    alg = ring_allreduce(3)
    rt = EmulatedRuntime(alg)
    for i in range(4):
        ins = int_inputs(alg, 10 + i, np.float32, seed=i)
        assert same(rt.run(ins, slice_elems=4), reference.run(alg, ins, slice_elems=4))
    assert rt.epoch == 4
    assert rt.ctrl[:, 0].max() > 0          # tails kept counting, never reset


def test_out_of_place_leaves_inputs_and_poisons_nothing():
    from msccl_py.runtime.cupy.packer import pack
    alg = ring_allreduce(4)
    alg.outofplace = True
    ins = int_inputs(alg, 8, np.float32)
    keep = [x.copy() for x in ins]
    out_in = emulated_run(alg, ins, inplace=True)
    assert same(ins, keep)
    assert pack(alg).nblocks == 4
    np.testing.assert_array_equal(out_in[0], sum(keep))


def test_fifo_deadlock_reports_where_and_on_what():
    alg = read_xml(fifo_deadlock_xml())
    small = int_inputs(alg, 4, np.float32)
    out = emulated_run(alg, small, slice_elems=16, watchdog=0.5)
    np.testing.assert_array_equal(out[0], small[1])
    big = int_inputs(alg, 64, np.float32)
    with pytest.raises(MscclDeadlockError) as exc:
        emulated_run(alg, big, slice_elems=16, watchdog=0.5)
    msg = str(exc.value)
    assert "fifo_deadlock: deadlock" in msg
    assert "threadblock 0 step 0 (s)" in msg and "FIFO room to send to rank" in msg
    with pytest.raises(MscclDeadlockError):
        reference.run(alg, big, slice_elems=16)       # the reference agrees it deadlocks
    # the runtime is usable again after the abort
    again = emulated_run(alg, small, slice_elems=16, watchdog=0.5)
    np.testing.assert_array_equal(again[1], small[0])


def test_receive_wait_is_reported_with_the_sender():
    # rank 1 receives twice but rank 0 only sends once per iteration: the
    # static checks reject it, so build one that passes them but still hangs:
    # rank 0 waits on a dependency that only releases after it receives.
    tb0 = ir.Threadblock(0, recv_peer=1, steps=[
        ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0), has_dependents=True)])
    tb1 = ir.Threadblock(1, send_peer=1, steps=[
        ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0), depends=[(0, 0)])])
    peer = ir.Threadblock(0, send_peer=0, recv_peer=0, steps=[
        ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0)),
        ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
    alg = ir.Algorithm("wait_cycle", "custom", "Simple", False, 2, 1, 1,
                       [ir.Gpu(0, 1, 1, 0, [tb0, tb1]), ir.Gpu(1, 1, 1, 0, [peer])])
    with pytest.raises(MscclDeadlockError) as exc:
        emulated_run(alg, int_inputs(alg, 4, np.float32), watchdog=0.3)
    msg = str(exc.value)
    assert "waited" in msg and ("data from rank" in msg or "to finish its step 0" in msg)


def test_bad_inputs_are_clear_errors():
    alg = ring_allreduce(4)
    with pytest.raises(SizeError, match="4 ranks but got 3"):
        emulated_run(alg, int_inputs(alg, 4, np.float32)[:3])
    with pytest.raises(SizeError, match="rank 2 input"):
        ins = int_inputs(alg, 4, np.float32)
        ins[2] = ins[2][:-1]
        emulated_run(alg, ins)
    with pytest.raises(MscclRuntimeError, match="dtype int8 is not supported"):
        emulated_run(alg, [np.zeros(16, np.int8)] * 4)
    with pytest.raises(MscclRuntimeError, match="reduction op 'xor'"):
        emulated_run(alg, int_inputs(alg, 4, np.float32), "xor")


def test_build_failure_is_a_runtime_error(monkeypatch, tmp_path):
    import shutil
    kernel = tmp_path / "kernel"
    shutil.copytree(emulation.KERNEL_DIR, kernel)
    with open(kernel / "emulation.cpp", "a") as f:
        f.write("\nthis does not compile;\n")
    monkeypatch.setenv("MSCCL_PY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(emulation, "KERNEL_DIR", kernel)
    monkeypatch.setattr(emulation.source_module, "KERNEL_DIR", kernel)
    with pytest.raises(MscclRuntimeError, match="building the host emulation failed"):
        emulation.build()


def test_missing_compiler_is_a_runtime_error(monkeypatch):
    monkeypatch.setattr(emulation, "compiler", lambda: None)
    with pytest.raises(MscclRuntimeError, match="needs a C\\+\\+20 compiler"):
        emulation.build()


def test_build_is_cached_by_source_hash(monkeypatch, tmp_path):
    path = emulation.build()
    assert path.exists() and path.parent == emulation.cache_dir()
    assert emulation.build() == path
