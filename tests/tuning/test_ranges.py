"""Exact crossovers between candidates and the 2% merge, on made-up time curves."""

from __future__ import annotations

import math

import pytest

from msccl_py.errors import MscclError
from msccl_py.tuning.ranges import TOLERANCE, Timer, merge, partition, probes

SIZES = [1 << k for k in range(10, 27)]


def _timer(curves):
    return Timer(lambda i, n: curves[i](n))


def _affine(lat, bw):
    return lambda n: lat + n / bw


def test_partition_finds_every_crossover_to_the_byte():
    curves = [_affine(5, 1e3), _affine(20, 1e4), _affine(60, 1e5)]
    timer = _timer(curves)
    parts = partition(timer, SIZES, [0, 1, 2])
    assert [p.best for p in parts] == [0, 1, 2]
    assert parts[0].lo == 0 and parts[-1].hi is None
    for a, b in zip(parts, parts[1:]):
        assert b.lo == a.hi + 1
        # the best changes exactly at the boundary
        assert timer.best(a.hi, [0, 1, 2]) == a.best and timer.best(b.lo, [0, 1, 2]) == b.best


def test_a_tied_candidate_leaves_no_sliver():
    # 1 beats both others only within about 150 bytes of their crossover, by under 1%
    t0, t2 = _affine(5, 1e3), _affine(20, 1e4)
    curves = [t0, lambda n: (t0(n) + t2(n)) / 2 - 0.07, t2]
    timer = _timer(curves)
    parts = partition(timer, SIZES, [0, 1, 2])
    assert [p.best for p in parts] == [0, 1, 2] and parts[1].hi - parts[1].lo < 400
    ranges = merge(timer, parts)
    assert [r.winner for r in ranges] == [0, 2] and all(r.worst <= TOLERANCE for r in ranges)
    assert ranges[1].lo == parts[2].lo


def test_winners_more_than_2_percent_apart_stay_apart():
    curves = [_affine(5, 1e3), _affine(20, 1e4)]
    timer = _timer(curves)
    ranges = merge(timer, partition(timer, SIZES, [0, 1]))
    assert [r.winner for r in ranges] == [0, 1]
    # no one candidate is within 2% of the best across both
    for c in (0, 1):
        assert any(timer(c, s) > TOLERANCE * min(timer(0, s), timer(1, s))
                   for r in ranges for s in probes(r.lo, r.hi, SIZES))


def test_every_range_is_within_2_percent_of_the_best_inside_it():
    curves = [_affine(5, 1e3), _affine(5.05, 1.01e3), _affine(20, 1e4), _affine(20.3, 1.03e4),
              _affine(60, 1e5)]
    timer = _timer(curves)
    ranges = merge(timer, partition(timer, SIZES, list(range(5))))
    for r in ranges:
        top = SIZES[-1] if r.hi is None else r.hi
        for s in {max(r.lo, SIZES[0]), top, *range(max(r.lo, SIZES[0]), top, max(1, top // 97))}:
            assert timer(r.winner, s) <= TOLERANCE * min(c(s) for c in curves), (r, s)


def test_prefer_picks_among_the_near_ties_and_refuses_joins_that_cost_more():
    curves = [_affine(10, 1e3), _affine(10.1, 1e3)]
    timer = _timer(curves)
    parts = partition(timer, SIZES, [0, 1])
    assert [r.winner for r in merge(timer, parts)] == [0]
    assert [r.winner for r in merge(timer, parts, lambda i, lo, hi: -i)] == [1]


def test_probes_cover_the_ends_and_the_samples():
    assert probes(0, 3000, [1024, 2048, 4096]) == [1024, 1448, 2048, 2478, 3000]
    assert probes(5000, None, [1024, 2048, 4096]) == [4096]


def test_a_sample_no_candidate_runs_is_an_error():
    timer = _timer([lambda n: math.inf if n > 4096 else 1.0])
    with pytest.raises(MscclError, match="no candidate is verified for 8192 bytes"):
        partition(timer, [1024, 8192], [0])
