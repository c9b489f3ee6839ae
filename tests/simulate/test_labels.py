"""Bottleneck labels name what bounds the time and its share; latency only where the hop
chain explains at least half of it."""

from __future__ import annotations

import re

import pytest

from msccl_py import library
from msccl_py.plan.tables import plan_for
from msccl_py.simulate import (BOUND_SHARE, LATENCY_SHARE, bottleneck, bound_shares,
                                machine_model, simulate)
from msccl_py.simulate.engine import run
from msccl_py.topologies import loads

from sim_machines import RING8

LABEL = re.compile(r"^(?P<what>.+?),? (?P<share>\d+)%$")


def _parts(label: str) -> list[tuple[str, int]]:
    out = []
    for part in label.split("; "):
        m = LABEL.match(part)
        assert m, label
        out.append((m["what"], int(m["share"])))
    return out


@pytest.mark.parametrize("size", ["1KiB", "1MiB", "16MiB", "1GiB"])
def test_a_label_names_its_share_and_latency_only_when_it_explains_half(size):
    m = machine_model("ndv5")
    alg = library.compile("allreduce_ring", 8, channels=8)
    r, = simulate(alg, m, size)
    t = run(plan_for(alg), m, r.bytes)
    shares = dict((w, f) for f, w in bound_shares(plan_for(alg), t, m.protocol("Simple").base_us))
    parts = _parts(r.bottleneck)
    for what, pct in parts:
        assert abs(shares[what] * 100 - pct) <= 0.5
    latency = next(f for w, f in shares.items() if w.startswith("latency"))
    named = [w for w, _ in parts]
    assert any(w.startswith("latency") for w in named) == (latency >= LATENCY_SHARE
                                                           and named[0].startswith("latency"))
    if len(parts) == 2:   # nothing explains enough alone
        assert all(shares[w] < BOUND_SHARE for w in named if not w.startswith("latency"))


def test_a_long_call_with_a_short_hop_chain_is_not_latency_bound():
    # the case: 8 one-chunk ring channels at 1 GiB on ndv5 take ~15 ms, their hop
    # chain (14 hops of one pipeline iteration) well under a millisecond
    m = machine_model("ndv5")
    r, = simulate(library.compile("allreduce_ring", 8, channels=8), m, "1GiB")
    assert r.time_us > 5000 and "latency" not in r.bottleneck
    assert [w.split()[0] for w, _ in _parts(r.bottleneck)] == ["threadblock", "switch"]


def test_labels_on_a_uniform_ring():
    m = machine_model(loads(RING8))
    alg = library.compile("allgather_ring", 8)
    small, big = simulate(alg, m, ["1KiB", "1GiB"])
    assert _parts(small.bottleneck) == [("latency: 7 hops", 100)]
    (what, pct), = _parts(big.bottleneck)
    assert what.startswith("link ") and what.endswith("(l)") and pct >= 95
    tb = machine_model(loads(RING8.replace("}", "threadblock 40 GB/s }")))
    (what, pct), = _parts(simulate(alg, tb, "1GiB")[0].bottleneck)
    assert re.fullmatch(r"threadblock rank 0 tb \d+ \(in-order steps\)", what) and pct >= 95


@pytest.mark.parametrize("name,params,machine", [
    ("allreduce_ring", {"channels": 8}, "ndv5"),
    ("allgather_allpairs", {"protocol": "LL"}, "dgx-h100"),
    ("allreduce_recursive_halving_doubling", {}, "dgx1"),
    ("reduce_scatter_ring", {"protocol": "LL128"}, RING8),
])
def test_labels_are_those_of_the_exact_hop_chain(name, params, machine):
    # simulate() bounds the hop chain and runs its pass only where the bounds leave the
    # label open: every label is the one the exact chain gives
    m = machine_model(loads(machine) if "{" in machine else machine)
    alg = library.compile(name, 8, **params)
    plan, base = plan_for(alg), m.protocol(alg.protocol).base_us
    for r in simulate(alg, m, "1KiB:1GiB"):
        exact = run(plan, m, r.bytes, alg.protocol)
        assert r.bottleneck == bottleneck(plan, exact, base), r.bytes
