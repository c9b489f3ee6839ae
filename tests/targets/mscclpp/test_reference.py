"""Plans run NumPy-exact on the reference runtime (sum/float32 and max/int32) and through the CLI."""

from __future__ import annotations


import numpy as np
import pytest

from msccl_py.cli import main
from msccl_py.errors import MscclDeadlockError
from msccl_py.targets.mscclpp.read import read_plan
from msccl_py.runtime.mscclpp.reference import input_elems, run_reference
from msccl_py.verify.mscclpp.plan_check import check_data, expected
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclpp"
SLOW = {"alltoall_pipeline_8", "alltoall_ring_8", "alltoall_ring_peers_8", "alltoall_ring_oop_8"}
#: past the executor's limits, or written in an older format its parser rejects
SKIP = {"multi_node/reducescatter_pkt_2x8", "execution_files/allreduce_pipeline"}
COLLECTIVE_PLANS = [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p
                    for p in sorted(p for d in ("single_node", "multi_node", "default_algos", "executor_tests",
                                                "execution_files")
                                    for p in (DATA / d).glob("*.json") if f"{d}/{p.stem}" not in SKIP)]
CASES = [("sum", np.float32), ("max", np.int32)]


def _inputs(plan, nbytes, dtype, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.integers(-50, 51, n).astype(dtype)
            for n in input_elems(plan, nbytes, np.dtype(dtype).itemsize)]


def _size(plan):
    # 2 KiB per chunk of the plan, inside its message-size range
    from msccl_py.plan.mscclpp.geometry import plan_chunks
    return max(plan.min_message_size, plan_chunks(plan) * 2048)


@pytest.mark.parametrize("path", COLLECTIVE_PLANS, ids=lambda p: getattr(p, "stem", None))
@pytest.mark.parametrize("op,dtype", CASES, ids=["sum-float32", "max-int32"])
def test_collective_plan_numpy_exact(path, op, dtype):
    plan = read_plan(str(path))
    inputs = _inputs(plan, _size(plan), dtype)
    outs = run_reference(plan, inputs, op=op)
    if plan.collective == "sendrecv":
        assert check_data(plan, inputs, outs) == []
        return
    want = expected(plan, inputs, {"sum": np.add, "max": np.maximum}[op])
    for r, (o, e) in enumerate(zip(outs, want)):
        assert o.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(o, e, err_msg=f"rank {r}")


def test_deadlocked_plan_raises_naming_the_wait():
    plan = read_plan(str(DATA / "unit_tests" / "signal_wait_fuse_test.json"))
    plan.gpus[0].input_chunks = plan.gpus[1].input_chunks = 1
    with pytest.raises(MscclDeadlockError, match="rank 0 threadblock 0 op 3 \\(wait\\) waits on memory channel 2"):
        run_reference(plan, [np.zeros(4, np.float32)] * 2)


def test_cli_run_verify_info(capsys):
    plan = str(DATA / "single_node" / "allreduce_pkt_4.json")
    assert main(["run", plan, "--bytes", "64KiB", "--op", "max", "--dtype", "int32"]) == 0
    assert "reference: allreduce allreduce_pkt_4 64 KiB int32 max in-place: correct" in capsys.readouterr().out
    assert main(["verify", plan]) == 0
    assert capsys.readouterr().out.startswith("ok: allreduce postcondition holds")
    assert main(["info", plan]) == 0
    assert "MSCCL++ plan, allreduce on 4 ranks, LL" in capsys.readouterr().out
    assert main(["verify", str(DATA / "unit_tests" / "signal_wait_fuse_test.json")]) == 1
    assert main(["verify", str(DATA / "multi_node" / "reducescatter_pkt_2x8.json")]) == 2


@pytest.mark.parametrize("text,message", [
    ("{\"name\": ", "malformed JSON at line 1"),
    ('{"name":"x","collective":"allreduce","protocol":"Simple","inplace":true,"gpus":['
     '{"id":0,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,"threadblocks":[{"id":0,'
     '"ops":[{"name":"bogus"}]}]}]}', "gpus[0].threadblocks[0].ops[0].name: unknown operation 'bogus'"),
])
def test_cli_bad_plan_one_line_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    for cmd in ("verify", "run", "info"):
        assert main([cmd, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and message in err
