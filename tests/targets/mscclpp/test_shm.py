"""The shm backend runs plans with one process per rank, bit for bit as the reference backend
does, with its native executor or the Python fallback, and reports stalls as the XML path does."""

from __future__ import annotations

import re

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.library import compile as compile_program
from msccl_py.runtime.mscclpp import shm
from msccl_py.runtime.mscclpp import shm_native as plan_native
from msccl_py.plan.mscclpp.geometry import smallest_size
from msccl_py.mscclpp_ir import Ref
from msccl_py.targets.mscclpp.emit import lower
from msccl_py.targets.mscclpp.read import read_plan, read_plan_text
from msccl_py.runtime.mscclpp.reference import input_elems, run_reference
from msccl_py.runtime.mscclpp.shm import run_shm
from msccl_py.verify.mscclpp.plan_check import expected
from msccl_py.runtime import shm as xml_shm
from msccl_py.runtime import shm_native
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclpp"
# one plan per mechanism: memory-channel reduce-send, LL packets, NVLS group store, port-channel
# hierarchical packets with barriers, threadblock groups, pipelines, semaphores
PLANS = ["single_node/allreduce_4", "single_node/allreduce_pkt_4", "single_node/allgather_nvls_zero_copy_4",
         "default_algos/reducescatter_multi_nodes_2x4", "multi_node/allgather_tbg_2x4",
         "single_node/allreduce_pipeline", "unit_tests/semaphore"]
# library programs lowered to plans at 4 ranks: (name, protocol, parameters)
LIBRARY = [("allreduce_ring", "Simple", {}), ("allreduce_ring", "LL", {}),
           ("allreduce_allpairs", "LL", {}), ("allreduce_recursive_halving_doubling", "Simple", {}),
           ("allgather_ring", "Simple", {"inplace": True}), ("allgather_ring", "LL", {"inplace": False}),
           ("allgather_recursive_doubling", "Simple", {"inplace": False}),
           ("reduce_scatter_ring", "Simple", {"inplace": False}),
           ("reduce_scatter_ring", "LL", {"inplace": True}),
           ("alltoall_allpairs", "Simple", {}), ("alltoall_two_step", "LL", {})]


@pytest.fixture
def native():
    if plan_native.library() is None:
        pytest.skip("the native plan executor cannot be built here")


@pytest.fixture
def python_executor(monkeypatch):
    monkeypatch.setenv(shm_native.ENV_MODE, "python")


def _library_plan(name, protocol, params):
    return lower(compile_program(name, 4, protocol=protocol, **params))


def _same_bits(plan, nbytes, seed=0, **kw):
    """run_shm and run_reference on random non-integer float32 (sum) and int32 (max)."""
    rng = np.random.default_rng(seed)
    for op, dtype in (("sum", np.float32), ("max", np.int32)):
        inputs = [(rng.standard_normal(n) * 100).astype(dtype)
                  for n in input_elems(plan, nbytes, 4)]
        want = run_reference(plan, inputs, op=op)
        got = run_shm(plan, inputs, op=op, **kw)
        for r, (o, e) in enumerate(zip(got, want)):
            assert o.dtype == e.dtype and o.tobytes() == e.tobytes(), f"{op} rank {r}"


@pytest.mark.parametrize("name,protocol,params", LIBRARY,
                         ids=[f"{n}-{p}-{'-'.join(f'{k}={v}' for k, v in q.items())}" for n, p, q in LIBRARY])
def test_native_is_bit_identical_to_reference_on_library_plans(native, name, protocol, params):
    plan = _library_plan(name, protocol, params)
    assert plan.protocol == protocol
    if "inplace" in params:
        assert plan.inplace == params["inplace"]
    small = smallest_size(plan)
    for nbytes in (small, 16 * small, 3 * small):
        _same_bits(plan, nbytes)


def test_every_dtype_and_reduction_in_turn(native):
    # one compiled call shape serves every reduction; NaN, infinities and -0 as NumPy has them
    plan = _library_plan("allreduce_allpairs", "LL", {})
    nbytes = 16 * smallest_size(plan)
    rng = np.random.default_rng(5)
    for dtype in (np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8):
        n = input_elems(plan, nbytes, np.dtype(dtype).itemsize)
        if np.dtype(dtype).kind == "f":
            inputs = [(rng.standard_normal(k) * 3).astype(dtype) for k in n]
            inputs[1][:3] = [np.nan, np.inf, -0.0]
        else:
            inputs = [rng.integers(0, 200, k).astype(dtype) for k in n]
        for op in ("sum", "prod", "max", "min"):
            want, got = run_reference(plan, inputs, op=op), run_shm(plan, inputs, op=op)
            assert all(o.tobytes() == e.tobytes() for o, e in zip(got, want)), (dtype, op)


@pytest.mark.parametrize("name", [pytest.param(p, marks=pytest.mark.slow) if p.endswith("2x4") and
                                  "tbg" in p else p for p in PLANS],   # 8 ranks: a pool of its own
                         ids=lambda n: n.split("/")[1])
def test_native_is_bit_identical_to_reference_on_mscclpp_plans(native, name):
    plan = read_plan(str(DATA / f"{name}.json"))
    if plan.collective == "test":       # synchronisation tests: size one chunk per rank
        for g in plan.gpus:
            g.input_chunks = g.output_chunks = max(g.input_chunks, 1)
    for nbytes in (smallest_size(plan), 8192 * plan.nranks):
        _same_bits(plan, nbytes)


@pytest.mark.parametrize("name", PLANS[:4], ids=lambda n: n.split("/")[1])
def test_python_fallback_is_exact(python_executor, name):
    plan = read_plan(str(DATA / f"{name}.json"))
    nbytes = 8192 * len(plan.gpus) if plan.collective != "allgather" else 4096 * len(plan.gpus)
    rng = np.random.default_rng(3)
    for op, dtype, ufunc in (("sum", np.float32, np.add), ("max", np.int32, np.maximum)):
        inputs = [rng.integers(-50, 51, n).astype(dtype) for n in input_elems(plan, nbytes, 4)]
        outs = run_shm(plan, inputs, op=op)
        for r, (o, e) in enumerate(zip(outs, expected(plan, inputs, ufunc))):
            np.testing.assert_array_equal(o, e, err_msg=f"{op} rank {r}")
    assert (plan.nranks, "python") in shm._pools


def test_python_fallback_is_bit_identical_on_a_library_ll_plan(python_executor):
    _same_bits(_library_plan("reduce_scatter_ring", "LL", {"inplace": True}), 4096)


def test_repeated_calls_start_clean(native):
    # the pool reuses the arena: counters, packet flags and poison are reset per call
    plan = _library_plan("allreduce_ring", "LL", {})
    nbytes = 4 * smallest_size(plan)
    for seed in range(3):
        _same_bits(plan, nbytes, seed=seed)
    # a plan that leaves output chunk 1 unwritten gets the reference's poison there, not the
    # previous call's data at the same place
    text = ('{"name":"c","collective":"test","protocol":"Simple","inplace":false,"gpus":[{"id":0,'
            '"input_chunks":2,"output_chunks":2,"scratch_chunks":0,"threadblocks":[{"id":0,"ops":['
            '{"name":"copy","src_buff":[{"type":"i","index":0,"size":%d}],'
            '"dst_buff":[{"type":"o","index":0,"size":%d}]}]}]}]}')
    full, half = read_plan_text(text % (2, 2)), read_plan_text(text % (1, 1))
    for n in (8, 1 << 18):              # 1 MiB: the executor poisons with streaming stores
        x = [np.arange(n, dtype=np.float32)]
        assert np.array_equal(run_shm(full, x)[0], x[0])
        out = run_shm(half, x)[0]
        assert np.array_equal(out[:n // 2], x[0][:n // 2]) and np.isnan(out[n // 2:]).all()


def test_a_pool_that_forgets_its_shapes_still_runs_them(native, monkeypatch):
    monkeypatch.setattr(shm, "_MAX_SHAPES", 2)
    plans = [_library_plan("allreduce_ring", "Simple", {}), _library_plan("allgather_ring", "LL", {})]
    for plan in plans + plans:
        for nbytes in (smallest_size(plan), 2 * smallest_size(plan)):
            _same_bits(plan, nbytes)


def test_a_chunk_past_the_buffer_is_refused_before_running():
    plan = read_plan(str(DATA / "single_node" / "allreduce_4.json"))
    op = next(op for op in plan.gpus[1].threadblocks[0].ops if op.src)
    op.src = (Ref(op.src[0].kind, op.src[0].buffer, 99, 1, op.src[0].rank, op.src[0].remote),) + op.src[1:]
    with pytest.raises(MscclRuntimeError, match=r"invalid: .*past the buffer"):
        run_shm(plan, [np.zeros(n, np.float32) for n in input_elems(plan, 2048, 4)])


# -- stalls -----------------------------------------------------------------------------------
def _stalled_ring():
    """allreduce_ring on 4 ranks whose rank 2 never signals: every rank ends up waiting."""
    plan = _library_plan("allreduce_ring", "Simple", {})
    tb = plan.gpus[2].threadblocks[0]
    tb.ops = [op for op in tb.ops if op.name != "signal"]
    return plan


ENVELOPE = (r"no progress for 1 s in call #\d+ run\(count=\d+, dtype=float32, op=sum, "
            r"program#[0-9a-f]+\); first noticed by rank \d\. Per rank:")


def _stall_lines(plan) -> list[str]:
    inputs = [np.ones(n, np.float32) for n in input_elems(plan, smallest_size(plan), 4)]
    with pytest.raises(MscclDeadlockError) as info:
        run_shm(plan, inputs, timeout=1.0)
    text = str(info.value)
    head, *lines = text.split("\n")
    assert re.fullmatch(ENVELOPE, head), head
    assert len(lines) == plan.nranks            # one line per waiting rank
    return [re.sub(r"call #\d+ run\(.*?\)", "call", line) for line in lines]


@pytest.mark.parametrize("executor", ["native", pytest.param("python", marks=pytest.mark.slow)])
def test_stalled_plan_names_what_each_rank_waits_on(executor, monkeypatch):
    monkeypatch.setenv(shm_native.ENV_MODE, executor)
    if executor == "native" and plan_native.library() is None:
        pytest.skip("the native plan executor cannot be built here")
    plan = _stalled_ring()
    lines = _stall_lines(plan)
    # rank 3 waits for the signals rank 2 never sends; the others where the chain breaks:
    # (channel, peer, signals taken) per rank; each stops at the wait after those taken
    waits = [(1, 3, 1), (0, 0, 2), (0, 1, 3), (1, 2, 0)]

    def op_index(rank: int, taken: int) -> int:
        ops = plan.gpus[rank].threadblocks[0].ops
        return [i for i, op in enumerate(ops) if op.name == "wait"][taken]
    assert lines == [f"rank {r}: in call: threadblock 0 op {op_index(r, n)} (wait) waits on "
                     f"memory channel {c} from rank {peer} (signals arrived {n}, taken {n}; the "
                     f"plan signals it {0 if r == 3 else 6} times for 6 waits)"
                     for r, (c, peer, n) in enumerate(waits)]


def test_stall_reads_like_an_xml_stall():
    # the same envelope, then "rank R: in call #N ...: what it waits on", one line per rank
    def tb(peer):
        return ir.Threadblock(0, peer, peer, 0, [ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0)),
                                                 ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
    alg = ir.Algorithm("recv-first", "custom", "Simple", False, 2, 1, 1,
                       [ir.Gpu(0, 1, 1, 0, [tb(1)]), ir.Gpu(1, 1, 1, 0, [tb(0)])])
    with pytest.raises(MscclDeadlockError) as info:
        xml_shm.run(alg, [np.ones(4, np.float32), np.ones(4, np.float32)], timeout=1.0)
    head, *lines = str(info.value).split("\n")
    assert re.fullmatch(ENVELOPE, head) and len(lines) == 2
    assert all(re.match(rf"rank {r}: in call #\d+ run\(.*\): tb 0 .* waits for data from rank", ln)
               for r, ln in enumerate(lines))


def test_cli_run_of_a_stalled_plan_exits_1(tmp_path, capsys, monkeypatch):
    from msccl_py.cli import main
    from msccl_py.targets.mscclpp.write import write_plan
    from msccl_py.runtime import process_group
    monkeypatch.setattr(process_group, "DEFAULT_TIMEOUT", 1.0)
    path = tmp_path / "stalled.json"
    write_plan(_stalled_ring(), str(path))
    assert main(["run", str(path), "--backend", "shm", "--bytes", "4KiB"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^shm: allreduce .*: DEADLOCK: " + ENVELOPE, out, re.M), out
    assert len(re.findall(r"^rank \d: in call #\d+ run\(.*\): threadblock 0 op \d+ \(wait\) waits on "
                          r"memory channel", out, re.M)) == 4
