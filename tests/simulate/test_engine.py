"""The timing engine: steady-state extrapolation, cycles, resource sharing."""

from __future__ import annotations

import pytest

from msccl_py import ir, library
from msccl_py.errors import SimulationError
from msccl_py.plan.tables import build_plan
from msccl_py.simulate import engine, machine_model, simulate
from msccl_py.topologies import loads

from sim_machines import RING8, ring_machine


@pytest.mark.parametrize("name,protocol", [("allreduce_ring", "Simple"),
                                           ("allgather_allpairs", "LL"),
                                           ("reduce_scatter_ring", "LL128")])
def test_extrapolation_matches_simulating_every_iteration(name, protocol):
    alg = library.compile(name, 8, protocol=protocol)
    m = machine_model("dgx-h100")
    size = 256 << 20
    fast = engine.run(build_plan(alg), m, size)
    full = engine.run(build_plan(alg), m, size, extrapolate=False)
    assert len(full.ends) == fast.iterations
    assert len(fast.ends) < fast.iterations / 2
    assert fast.time_us == pytest.approx(full.time_us, rel=1e-9)


def test_wait_cycle_is_an_error_naming_a_step():
    a = ir.Threadblock(0, send_peer=1, recv_peer=1,
                       steps=[ir.Step("recv", dst=ir.Loc("o", 0)), ir.Step("send", ir.Loc("i", 0))])
    b = ir.Threadblock(0, send_peer=0, recv_peer=0,
                       steps=[ir.Step("recv", dst=ir.Loc("o", 0)), ir.Step("send", ir.Loc("i", 0))])
    alg = ir.Algorithm("x", "custom", "Simple", False, 2, 1, 1,
                       [ir.Gpu(0, 1, 1, 0, [a]), ir.Gpu(1, 1, 1, 0, [b])])
    with pytest.raises(SimulationError, match=r"rank \d tb 0 step 0 \(recv\) can never run"):
        simulate(alg, ring_machine(2), "1MiB")


def test_shared_link_is_split_by_bytes():
    # two channels of the same ring share each link: together they get its 100 GB/s
    m = machine_model(loads(RING8))
    one = simulate(library.compile("allgather_ring", 8), m, "1GiB")[0]
    two = simulate(library.compile("allgather_ring", 8, channels=2), m, "1GiB")[0]
    assert two.busbw_GBps == pytest.approx(one.busbw_GBps, rel=0.05)
    assert two.busbw_GBps <= 100.0


def test_cost_does_not_grow_with_size():
    alg = library.compile("allreduce_ring", 8)
    m = machine_model("dgx-h100")
    small = engine.run(build_plan(alg), m, 1 << 20)
    large = engine.run(build_plan(alg), m, 4 << 30)
    assert large.iterations > 100 * small.iterations
    assert len(large.ends) <= 6


def test_a_pipeline_that_holds_a_period_while_filling_is_not_cut_short():
    pytest.importorskip("highspy")
    # a synthesized MI250 allgather (trees, 4 chunks per rank) holds one period for two
    # iterations while a slower chain is still filling (its fourth iteration is slower
    # than its third): ending the simulation at two equal periods predicted it 7% fast,
    # below its busiest link's time
    from msccl_py.synthesis.candidates import bandwidth_schedules
    from msccl_py.synthesis.hops import hops
    from msccl_py.synthesis.schedule_program import build, program_source
    (_, schedule, _, _), = bandwidth_schedules(hops("mi250"), "allgather", chunks=(4,),
                                               rings=False)
    prog = build(program_source(schedule, "trees4", "mi250", None, ["trees, 4 chunks"]))
    with prog:
        alg = prog.lower()
    m = machine_model("mi250")
    fast = engine.run(build_plan(alg), m, 1 << 30)
    full = engine.run(build_plan(alg), m, 1 << 30, extrapolate=False)
    assert len(fast.ends) < len(full.ends)
    assert fast.time_us == pytest.approx(full.time_us, rel=1e-9)
    assert fast.time_us >= fast.resource_bound_us


def test_full_fifo_holds_the_sender_back():
    # rank 0 sends four 1 MiB chunks; rank 1 copies each away slowly after receiving it.
    # Simple's FIFO holds 2 transfers, so send 2 waits for receive 0 and send 3 for receive 1
    send = ir.Threadblock(0, send_peer=1, steps=[ir.Step("send", ir.Loc("i", k), ir.Loc("s", k))
                                                 for k in range(4)])
    recv_steps = []
    for k in range(4):
        recv_steps += [ir.Step("recv", ir.Loc("i", k), ir.Loc("s", k)),
                       ir.Step("copy", ir.Loc("s", k), ir.Loc("o", k))]
    recv = ir.Threadblock(0, recv_peer=0, steps=recv_steps)
    alg = ir.Algorithm("x", "custom", "Simple", False, 2, 4, 1,
                       [ir.Gpu(0, 4, 4, 4, [send]), ir.Gpu(1, 4, 4, 4, [recv])])
    plan = build_plan(alg)
    m = machine_model(loads("machine m { gpus 2 linktype l 100 GB/s link 0 <-> 1 l "
                            "memory 10 GB/s }"))
    t = engine.run(plan, m, 4 << 20)
    start, end = t.starts[0], t.ends[0]
    sends, recvs = [0, 1, 2, 3], [4, 6, 8, 10]
    assert start[sends[2]] >= end[recvs[0]]
    assert start[sends[3]] >= end[recvs[1]]
    assert start[sends[1]] < end[recvs[0]]  # two transfers fit without waiting


@pytest.mark.parametrize("name,params,machine", [
    ("allreduce_ring", {"channels": 8}, "ndv5"),
    ("allgather_allpairs", {"protocol": "LL"}, "dgx-h100"),
    ("allreduce_binomial_tree", {}, "dgx1"),
    ("nccl_tree", {}, "dgx-a100"),
])
def test_chain_bounds_hold_the_hop_chain(name, params, machine):
    m = machine_model(machine)
    plan = build_plan(library.compile(name, 8, **params))
    proto = plan.protocol
    for k in range(10, 31, 4):
        lo, hi = engine.chain_bounds(plan, m, 1 << k, proto)
        exact = engine.hop_chain(plan, m, 1 << k, proto)
        assert lo * (1 - 1e-9) <= exact <= hi * (1 + 1e-9)
    # small calls: one path is longest for α and per byte, so the bounds meet
    lo, hi = engine.chain_bounds(plan, m, 1 << 10, proto)
    assert lo == hi == pytest.approx(engine.hop_chain(plan, m, 1 << 10, proto))


def test_the_engine_keeps_its_caches_per_plan_and_drops_them_with_it():
    import gc
    m = machine_model(loads(RING8))
    plan = build_plan(library.compile("allreduce_ring", 8))
    gc.collect()     # plans other tests dropped must not leave the cache during this one
    before = len(engine.CACHE)
    engine.run(plan, m, 1 << 20, bounds=True)
    assert len(engine.CACHE) == before + 1
    assert not [k for k in plan._lists if "sim" in str(k)]    # nothing on the plan itself
    del plan
    gc.collect()
    assert len(engine.CACHE) == before
