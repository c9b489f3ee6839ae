"""The runtime contract: one table per fact, and the same bad call refused the same way by
every runtime (reference, shm, the GPU kernel's host emulation, the MSCCL++ plan runtime)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.plan import contract
from msccl_py.plan.tables import plan_for
from msccl_py.runtime import reference, shm
from msccl_py.runtime.cupy import emulated_run
from msccl_py.targets.mscclpp.emit import lower
from msccl_py.runtime.mscclpp.reference import run_reference
from msccl_py.verify.samples import ring_allgather, ring_allreduce

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def _xml_runtimes():
    return [pytest.param(reference.run, id="reference"), pytest.param(shm.run, id="shm"),
            pytest.param(emulated_run, id="emulated", marks=needs_gxx)]


def test_backend_tables_are_subsets_of_the_contract():
    for backend in contract.BACKENDS.values():
        assert set(backend.ops) <= set(contract.OPS), backend.name
        assert set(backend.dtypes) <= set(contract.CALL_DTYPES), backend.name
    assert "avg" not in contract.BACKENDS["mscclpp"].ops
    assert [contract.device_op_code(op) for op in contract.OPS] == [0, 1, 2, 3, 0]


def test_descriptor_text_names_codes_it_does_not_know():
    assert contract.describe_call((99, 8, 1, 0, 0, 1, 0)) == \
        "collective#99(count=8, dtype=float32, program#1)"
    assert contract.describe_call((0, 0, 0, 0, 0, 0, 0)) == "barrier()"


def test_admission_names_the_first_problem():
    alg = ring_allreduce(2)
    alg.gpus[1].threadblocks[0].channel = 5
    with pytest.raises(MscclRuntimeError, match=r"cannot run .*channel 5 outside 0\.\.0"):
        contract.admit(alg, plan_for(alg))


def test_in_place_default_and_refusal():
    alg = ring_allgather(3)          # declared out-of-place only
    assert contract.default_inplace(alg) is False
    with pytest.raises(MscclRuntimeError, match="not declared in-place"):
        contract.resolve_inplace(alg, True)


def test_chunk_size_from_the_first_rank_with_input():
    alg = ring_allreduce(2)
    table = np.array([[0, 2, 0], [2, 2, 0]])
    assert contract.chunk_elems(alg, table, [np.zeros(0), np.zeros(6)]) == 3
    with pytest.raises(SizeError, match="no rank has input chunks"):
        contract.chunk_elems(alg, np.zeros((2, 3), int), [np.zeros(0), np.zeros(0)])


@pytest.mark.parametrize("run", _xml_runtimes())
@pytest.mark.parametrize("inputs,error,text", [
    ([np.ones(4)], SizeError, "runs on 2 ranks but got 1 inputs"),
    ([np.ones(3), np.ones(3)], SizeError, "rank 0 input has 3 elements, not a multiple"),
    ([np.ones(4), np.ones(6)], SizeError, "rank 1 input must be 1-D with 4 elements"),
    ([np.ones(4), np.ones(4, np.float32)], MscclRuntimeError, "share one dtype"),
])
def test_same_bad_input_same_error_in_every_runtime(run, inputs, error, text):
    with pytest.raises(error, match=text) as info:
        run(ring_allreduce(2), inputs)
    assert type(info.value) is error


def test_plan_runtime_refuses_a_wrong_input_count_the_same_way():
    plan = lower(ring_allreduce(2))
    with pytest.raises(SizeError, match="runs on 2 ranks but got 1 inputs"):
        run_reference(plan, [np.ones(8, np.float32)])
