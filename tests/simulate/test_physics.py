"""Physics on a uniform ring: bandwidth-bound at 1 GiB, latency-bound and linear at 1 KiB."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py import library
from msccl_py.simulate import machine_model, simulate
from msccl_py.topologies import loads

from sim_machines import RING8, ring_machine

EFFICIENCY = {"Simple": 1.0, "LL128": 120 / 128, "LL": 0.5}
RINGS = ("allgather_ring", "reduce_scatter_ring", "allreduce_ring")


@pytest.fixture(scope="module")
def ring8():
    return machine_model(loads(RING8))


@pytest.mark.parametrize("protocol,instances", [("Simple", 1), ("LL128", 1), ("LL", 4)])
@pytest.mark.parametrize("name", RINGS)
def test_ring_reaches_link_bandwidth_times_efficiency(ring8, name, protocol, instances):
    # one LL ring leaves a hop latency exposed per 32 KiB iteration (next test); four
    # instances of it overlap their latencies, as NCCL's channels do
    alg = library.compile(name, 8, protocol=protocol, instances=instances)
    r, = simulate(alg, ring8, "1GiB")
    want = 100.0 * EFFICIENCY[protocol]
    assert r.busbw_GBps == pytest.approx(want, rel=0.05)
    assert r.busbw_GBps <= want * 1.0001
    assert r.bottleneck.startswith("link ")
    doubled, = simulate(alg, ring8.with_bandwidth_scale(2), "1GiB")
    assert doubled.busbw_GBps / r.busbw_GBps == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("name", RINGS)
def test_ll_ring_exposes_one_hop_latency_per_iteration(ring8, name):
    # 32 KiB LL slices take 0.655 µs per hop at 100 GB/s (64 KiB on the wire); one 0.5 µs
    # hop latency per pipeline iteration stays on the critical path (docs/performance-model.md)
    alg = library.compile(name, 8, protocol="LL")
    r, = simulate(alg, ring8, "1GiB")
    assert 0.88 * 50 <= r.busbw_GBps <= 0.96 * 50
    # at 200 GB/s a 0.33 µs ring step is shorter than the 0.5 µs hop: latency bound
    doubled, = simulate(alg, ring8.with_bandwidth_scale(2), "1GiB")
    assert doubled.busbw_GBps / r.busbw_GBps < 1.4
    slow, = simulate(alg, machine_model(loads(RING8.replace("0.5 us", "5 us"))), "1GiB")
    assert slow.busbw_GBps < 0.5 * r.busbw_GBps


@pytest.mark.parametrize("name,hops_per_rank", [("allgather_ring", 1), ("allreduce_ring", 2)])
def test_small_message_time_is_linear_in_sequential_hops(name, hops_per_rank):
    hops, times = [], []
    for n in (3, 4, 6, 8, 12):
        m = machine_model(ring_machine(n))
        r, = simulate(library.compile(name, n), m, "1KiB")
        hops.append(hops_per_rank * (n - 1))
        times.append(r.time_us)
        label, share = r.bottleneck.rsplit(", ", 1)
        assert label == f"latency: {hops_per_rank * (n - 1)} hops" and int(share[:-1]) >= 90
    slope, intercept = np.polyfit(hops, times, 1)
    fitted = slope * np.array(hops) + intercept
    assert np.max(np.abs(fitted - times) / times) < 0.02
    # a hop costs the link's 0.5 µs plus Simple's 2.8 µs plus a little transfer time
    assert 3.3 <= slope <= 3.6


def test_small_message_time_follows_latency_not_bandwidth():
    alg = library.compile("allgather_ring", 8)
    base, = simulate(alg, machine_model(ring_machine(8)), "1KiB")
    fast, = simulate(alg, machine_model(ring_machine(8, bw=1000)), "1KiB")
    slow_links, = simulate(alg, machine_model(ring_machine(8, latency_us=2.5)), "1KiB")
    assert fast.time_us == pytest.approx(base.time_us, rel=0.02)
    assert slow_links.time_us - base.time_us == pytest.approx(7 * 2.0, rel=0.02)
