"""Shares among the connections busy at once: a worked example, and capacity safety."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py import ir, library
from msccl_py.plan.tables import IS_SEND, S_OP, S_SEND_CONN, build_plan
from msccl_py.simulate import engine, machine_model
from msccl_py.simulate.sharing import Shares
from msccl_py.topologies import loads

#: two boxes of two GPUs, each GPU with its own 50 GB/s NIC, no threadblock limit
BOXES = ("machine box { gpus 2 linktype l 100 GB/s latency 0.5 us link 0 <-> 1 l "
         "nic n0 50 GB/s gpus 0 nic n1 50 GB/s gpus 1 }")


def _two_sends(apart: bool) -> ir.Algorithm:
    """Rank 0 sends one chunk to rank 2 and one to rank 3, both through its NIC; ``apart``:
    the second send waits for the first."""
    send = [ir.Threadblock(0, send_peer=2, steps=[ir.Step("send", ir.Loc("i", 0))]),
            ir.Threadblock(1, send_peer=3, channel=1, steps=[
                ir.Step("send", ir.Loc("i", 0), depends=[(0, 0)] if apart else [])])]
    recv = [ir.Threadblock(0, recv_peer=0, channel=k, steps=[ir.Step("recv", dst=ir.Loc("o", 0))])
            for k in (0, 1)]
    return ir.Algorithm("two", "custom", "Simple", False, 4, 1, 2,
                        [ir.Gpu(0, 1, 1, 0, send), ir.Gpu(1, 1, 1, 0, []),
                         ir.Gpu(2, 1, 1, 0, [recv[0]]), ir.Gpu(3, 1, 1, 0, [recv[1]])])


@pytest.mark.parametrize("apart", [False, True])
def test_two_connections_on_one_nic_share_it_only_while_both_send(apart):
    m = machine_model(loads(BOXES, nodes=2))
    plan = build_plan(_two_sends(apart))
    size = 256 << 10                          # one pipeline iteration
    t = engine.run(plan, m, size)
    assert t.iterations == 1
    sends = np.nonzero(IS_SEND[plan.steps[:, S_OP]] & (plan.steps[:, S_SEND_CONN] >= 0))[0]
    took = t.ends[-1][sends] - t.starts[-1][sends]
    wire = size / m.protocol("Simple").efficiency
    # one after the other: the whole NIC (50 GB/s) each; at once: 25 GB/s each
    rate = 50e3 if apart else 25e3
    assert took == pytest.approx([wire / rate] * 2, rel=1e-9)
    overlap = min(t.ends[-1][sends]) > max(t.starts[-1][sends])
    assert overlap is not apart


def test_shares_of_the_connections_busy_at_one_instant_sum_to_at_most_one():
    rng = np.random.default_rng(7)
    nconn, nres = 12, 3
    conn = np.repeat(np.arange(nconn), 2)
    res = rng.integers(0, nres, size=2 * nconn)
    sh = Shares(conn, res, np.full(nres, 10.0), rng.integers(1, 5, nconn).astype(float),
                np.full(nconn, np.inf), 1.0)
    seg = rng.integers(0, nconn, 60)
    start = rng.uniform(0, 100, 60)
    end = start + rng.uniform(0, 20, 60)
    denom = sh.peaks(seg, start, end)
    assert (denom <= sh.static + 1e-9).all() and (denom < sh.static).any()
    share = sh.load[sh.conn] / denom
    for t in np.linspace(0, 120, 241):
        busy = np.zeros(nconn, dtype=bool)
        busy[seg[(start <= t) & (t < end)]] = True
        for r in range(nres):
            on = (sh.res == r) & busy[sh.conn]
            assert share[on].sum() <= 1 + 1e-9


@pytest.mark.parametrize("name,ranks,nodes,params,faster", [
    ("allreduce_hierarchical", 16, 2, {}, False),
    ("allreduce_hierarchical", 32, 4, {"protocol": "LL128"}, False),
    ("allreduce_rs_ag", 32, 4, {"rs": "halving", "ag": "doubling"}, True)])
def test_no_resource_carries_more_than_its_bandwidth_at_any_instant(name, ranks, nodes, params,
                                                                    faster):
    # the phases of these programs use different connections: some run faster than their
    # whole-call shares, yet at no instant do the busy ones together exceed a resource, over
    # every iteration of the call (a pipeline settled after two iterations overlaps its
    # third and later ones, which the extrapolation must count: hierarchical LL128 at 4
    # nodes once ran its NIC at 118%)
    from msccl_py.topologies import load
    m = machine_model(load("dgx-h100", nodes=nodes))
    plan = build_plan(library.compile(name, ranks, **params))
    w = engine.wiring(plan, m, plan.protocol)
    sends = np.nonzero(IS_SEND[plan.steps[:, S_OP]] & (plan.steps[:, S_SEND_CONN] >= 0))[0]
    conn = plan.steps[sends, S_SEND_CONN]
    sh = w.shares
    for size in (1 << 20, 64 << 20, 1 << 30):
        t = engine.run(plan, m, size)
        full = engine.run(plan, m, size, extrapolate=False)
        assert t.time_us == pytest.approx(full.time_us, rel=1e-6)
        assert t.time_us >= t.resource_bound_us * (1 - 1e-9)
        start = np.concatenate([s[sends] for s in full.starts])
        end = np.concatenate([e[sends] for e in full.ends])
        every = np.tile(conn, len(full.starts))
        for r in np.unique(sh.res):
            on = np.zeros(len(sh.load), dtype=bool)
            on[sh.conn[sh.res == r]] = True
            k = on[every]
            times = np.concatenate([start[k], end[k]])
            change = np.concatenate([full.rate[every[k]], -full.rate[every[k]]])
            order = np.lexsort((change, times))      # leaving before joining
            assert np.cumsum(change[order]).max(initial=0) <= sh.bw[r] * 1e3 * (1 + 1e-9)
        if faster:
            assert (t.rate > w.rate * 1.1).any()


def test_the_fast_path_shares_as_exact_does(monkeypatch):
    # halving and doubling: each phase a new peer, so a NIC's connections take turns; the
    # fast path times one rank (xor symmetries) with every rank's sends for the sharing
    from msccl_py.plan.tables import plan_for
    from msccl_py.simulate import quotient, simulate
    from msccl_py.topologies import load
    m = machine_model(load("dgx-h100", nodes=4))
    alg = library.compile("allreduce_rs_ag", 32, rs="halving", ag="doubling")
    q = quotient(plan_for(alg), m, alg.protocol)
    assert q is not None and q.classes < 32
    fast = [r.time_us for r in simulate(alg, m, "64MiB,1GiB")]
    exact = [r.time_us for r in simulate(alg, m, "64MiB,1GiB", exact=True)]
    assert fast == pytest.approx(exact, rel=1e-9)
    monkeypatch.setattr(engine, "PASSES", 0)     # the whole-call shares only
    whole = [r.time_us for r in simulate(alg, m, "64MiB,1GiB", exact=True)]
    assert all(a < b * 0.9 for a, b in zip(exact, whole))
