"""Library programs lowered to MSCCL++ plans: they verify, run exactly, and use only what the executor parses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import LoweringError, VerificationError
from msccl_py.library import compile as compile_program
from msccl_py.plan.mscclpp.geometry import smallest_size
from msccl_py.targets.mscclpp.emit import lower
from msccl_py.toolchain.mscclpp_plan import emit
from msccl_py.runtime.mscclpp.reference import input_elems, run_reference
from msccl_py.targets.mscclpp.schema import check_schema
from repo_paths import REPO

SCHEMA = json.loads((REPO / "tests" / "data" / "mscclpp_schema.json").read_text())

ONE_NODE = ["allreduce_allpairs", "allreduce_binomial_tree", "allreduce_hierarchical",
            "allreduce_recursive_halving_doubling", "allreduce_ring", "allreduce_rs_ag",
            "allgather_allpairs", "allgather_hierarchical", "allgather_recursive_doubling", "allgather_ring",
            "reduce_scatter_allpairs", "reduce_scatter_recursive_halving", "reduce_scatter_ring",
            "alltoall_allpairs", "alltoall_three_step", "alltoall_two_step"]
TWO_NODES = ["allreduce_hierarchical", "allgather_hierarchical", "alltoall_three_step", "alltoall_two_step"]


def _alg(name: str, ranks: int = 8, protocol: str | None = None, **params) -> ir.Algorithm:
    return compile_program(name, ranks, protocol=protocol, use_cache=False, **params)


def _expected(collective: str, inputs: list[np.ndarray], reduce) -> list[np.ndarray]:
    n = len(inputs)
    if collective == "allgather":
        return [np.concatenate(inputs)] * n
    if collective == "alltoall":
        b = inputs[0].size // n
        return [np.concatenate([x[r * b:(r + 1) * b] for x in inputs]) for r in range(n)]
    total = inputs[0]
    for x in inputs[1:]:
        total = reduce(total, x)
    if collective == "allreduce":
        return [total] * n
    b = total.size // n
    return [total[r * b:(r + 1) * b] for r in range(n)]


def _check_values(obj: dict) -> list[str]:
    """Values the executor's parser accepts, and the positional ids it relies on."""
    out = []
    if obj["protocol"] not in SCHEMA["protocols"]:
        out.append(f"protocol {obj['protocol']}")
    for k, gpu in enumerate(obj["gpus"]):
        if gpu["id"] != k:
            out.append(f"gpus[{k}].id is {gpu['id']}")
        out += [f"gpus[{k}] channel {c['channel_type']}" for c in gpu["channels"]
                if c["channel_type"] not in SCHEMA["channel_types"]]
        out += [f"gpus[{k}] remote buffer {b['type']}" for b in gpu["remote_buffers"]
                if b["type"] not in SCHEMA["buffer_types"]]
        for t, tb in enumerate(gpu["threadblocks"]):
            if tb["id"] != t:
                out.append(f"gpus[{k}].threadblocks[{t}].id is {tb['id']}")
            for j, op in enumerate(tb["ops"]):
                where = f"gpus[{k}].threadblocks[{t}].ops[{j}]"
                if op["name"] not in SCHEMA["op_names"]:
                    out.append(f"{where}.name {op['name']}")
                if op.get("channel_type", "none") not in SCHEMA["channel_types"]:
                    out.append(f"{where}.channel_type {op['channel_type']}")
                out += [f"{where} buffer {b['type']}" for b in op.get("src_buff", []) + op.get("dst_buff", [])
                        if "type" in b and b["type"] not in SCHEMA["buffer_types"]]
    return out


def _check(alg: ir.Algorithm, gpus_per_node: int | None = None):
    plan, text, verdict = emit(alg, gpus_per_node)
    obj = json.loads(text)
    assert check_schema(obj) == []
    assert _check_values(obj) == []
    assert verdict.startswith(f"{alg.collective} postcondition holds")
    nbytes = 2 * smallest_size(plan)
    rng = np.random.default_rng(1)
    for dtype, op, reduce in ((np.float32, "sum", np.add), (np.int32, "max", np.maximum)):
        n = input_elems(plan, nbytes, np.dtype(dtype).itemsize)
        inputs = [rng.integers(-1000, 1000, k).astype(dtype) for k in n]
        outputs = run_reference(plan, inputs, op)
        for r, (got, want) in enumerate(zip(outputs, _expected(alg.collective, inputs, reduce))):
            np.testing.assert_array_equal(got, want, err_msg=f"{alg.name} {op} rank {r}")
    return plan


@pytest.mark.parametrize("name", ONE_NODE)
def test_library_program_at_8_ranks(name):
    plan = _check(_alg(name, protocol="Simple"))
    assert plan.protocol == "Simple"
    assert all(not g.port_channels and g.memory_channels for g in plan.gpus)


@pytest.mark.parametrize("name", TWO_NODES)
def test_two_node_program_uses_port_channels_between_nodes(name):
    plan = _check(_alg(name, protocol="Simple", gpus_per_node=4), gpus_per_node=4)
    for g in plan.gpus:
        assert all(p // 4 == g.rank // 4 for p in g.memory_channels)
        assert all(p // 4 != g.rank // 4 for p in g.port_channels)
    assert any(g.port_channels for g in plan.gpus)


@pytest.mark.parametrize("name", ["allreduce_ring", "allgather_allpairs", "reduce_scatter_ring",
                                  "alltoall_allpairs"])
def test_ll_programs_become_packet_plans(name):
    plan = _check(_alg(name, protocol="LL"))
    names = {op.name for g in plan.gpus for tb in g.threadblocks for op in tb.ops}
    assert plan.protocol == "LL" and "ppkt" in names and not names & {"put", "signal", "wait"}


def test_ll_across_nodes_packs_before_the_port_put():
    plan = _check(_alg("allreduce_hierarchical", protocol="LL128", gpus_per_node=4), gpus_per_node=4)
    ports = [([o.name for o in tb.ops[:k] if o.name != "nop"][-1], op) for tb in plan.gpus[0].threadblocks
             for k, op in enumerate(tb.ops) if op.channel_type == "port"]
    assert ports and all(prev == "cpkt" and op.name == "ppkt" for prev, op in ports)


@pytest.mark.parametrize("protocol", ["LL", "LL128"])
@pytest.mark.parametrize("name", ONE_NODE)
def test_every_library_program_in_packets(name, protocol):
    _check(_alg(name, protocol=protocol))


@pytest.mark.parametrize("protocol", ["LL", "Simple"])
@pytest.mark.parametrize("name", TWO_NODES)
def test_every_two_node_program(name, protocol):
    _check(_alg(name, protocol=protocol, gpus_per_node=4), gpus_per_node=4)


def test_dependencies_between_threadblocks_become_semaphores():
    alg = _alg("allreduce_allpairs", 4, protocol="Simple")
    deps = sum(1 for _, tb in alg.threadblocks() for st in tb.steps for d in st.depends if d[0] != tb.id)
    plan = lower(alg)
    ops = [op for g in plan.gpus for tb in g.threadblocks for op in tb.ops]
    acquired = sum(len(op.semaphores) for op in ops if op.name == "sem_acquire")
    released = sum(len(op.semaphores) for op in ops if op.name == "sem_release")
    assert deps and acquired == released and 0 < acquired <= deps


def test_collective_without_executor_counterpart_is_refused():
    with pytest.raises(LoweringError, match="'broadcast' has no MSCCL\\+\\+ executor counterpart"):
        lower(_alg("broadcast_binomial_tree", 4))


def test_unmatched_send_is_refused():
    alg = _alg("allgather_ring", 4)
    tb, send = next((tb, st) for _, tb in alg.threadblocks() for st in tb.steps if st.op == "send")
    tb.steps.remove(send)
    with pytest.raises(LoweringError, match="sends but"):
        lower(alg)


def test_plan_that_does_not_verify_is_not_written():
    alg = _alg("allgather_ring", 4)
    recv = next(st for _, tb in alg.threadblocks() for st in tb.steps if st.op == "recv")
    recv.dst = ir.Loc(recv.dst.buffer, (recv.dst.offset + 1) % alg.gpus[0].output_chunks)
    with pytest.raises(VerificationError, match="plan is incorrect"):
        emit(alg)


def test_too_long_threadblocks_are_split_into_chained_segments():
    # one 20-rank ring in one threadblock: 20 steps of up to 5 operations each, past the executor's 64
    alg = compile_program("allgather_ring", 20, rings=1)
    plan = _check(alg)
    assert all(sum(1 + len(op.ops) for op in tb.ops) <= 64 for g in plan.gpus for tb in g.threadblocks)
    assert all(len(g.threadblocks) > len(a.threadblocks) for g, a in zip(plan.gpus, alg.gpus))
    # each later segment starts by acquiring the semaphore the segment before releases at its end
    first = plan.gpus[0].threadblocks[len(alg.gpus[0].threadblocks)].ops[0]
    assert first.name == "sem_acquire"


def test_barriers_where_the_executor_threads_need_them():
    plan = lower(_alg("allreduce_ring", 4, protocol="Simple"))
    names = [op.name for op in plan.gpus[0].threadblocks[0].ops]
    for k, name in enumerate(names):
        if name == "wait":                        # the block's other threads wait for the waiting thread
            assert names[k + 1] == "nop"
        if name == "signal":                      # the signal waits for every thread's slices
            assert names[k - 1] == "nop"
    assert "res" in names                         # a reduction and the put of its result are one pass


def test_more_than_16_semaphores_split_into_several_operations():
    alg = _alg("allreduce_allpairs", 24, protocol="Simple")
    consumers = {}
    for _, tb in alg.threadblocks():
        for st in tb.steps:
            for d in st.depends:
                consumers.setdefault(d, set()).add(tb.id)
    assert max(len(c) for c in consumers.values()) > 16     # one step releases more than 16 semaphores
    plan = _check(alg)
    sizes = [len(op.semaphores) for g in plan.gpus for tb in g.threadblocks for op in tb.ops if op.semaphores]
    assert max(sizes) == 16


@pytest.mark.parametrize("protocol", ["Simple", "LL"])
def test_cyclic_send_to_next_becomes_a_sendrecv_plan(protocol):
    plan, _, verdict = emit(_alg("send_to_next_pipeline", protocol=protocol, cyclic=True))
    assert plan.raw_collective == "sendrecv" and verdict.startswith("sendrecv postcondition holds")
    inputs = [np.arange(r * 100, r * 100 + n, dtype=np.float32) for r, n in
              enumerate(input_elems(plan, 2 * smallest_size(plan), 4))]
    outputs = run_reference(plan, inputs)
    for r in range(8):
        np.testing.assert_array_equal(outputs[r], inputs[(r - 1) % 8])


def test_custom_collective_that_is_not_a_sendrecv_is_refused():
    with pytest.raises(VerificationError, match="rank 0 output is not any other rank's input.*becomes a "
                                                "sendrecv plan"):
        emit(_alg("send_to_next_pipeline"))          # rank 0 receives nothing


@pytest.mark.parametrize("name, params", [
    ("allgather_ring", {"inplace": True}), ("allgather_recursive_doubling", {"inplace": True}),
    ("reduce_scatter_ring", {"inplace": False}), ("allreduce_allpairs", {"inplace": False}),
    ("allreduce_ring", {"instances": 2}), ("alltoall_allpairs", {"instances": 3, "protocol": "LL128"})])
def test_in_place_out_of_place_and_instances(name, params):
    alg = _alg(name, **params)
    plan = _check(alg)
    assert plan.inplace == alg.inplace
    if "inplace" in params:
        assert plan.inplace == params["inplace"]
