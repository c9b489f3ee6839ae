"""Bounded minimax and the least change that brings every residual within a target."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py.tuning.minimax import bounded_lsq, minimax, refine, within


def test_bounded_lsq_fixes_a_coefficient_at_its_bound_and_refits_the_rest():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    b = np.array([-2.0, 3.0, 1.0])
    free = np.linalg.lstsq(a, b, rcond=None)[0]
    assert free[0] < 0                                  # unbounded, x0 goes negative
    x = bounded_lsq(a, b, lo=np.zeros(2))
    assert x[0] == 0.0
    assert x[1] == pytest.approx(2.0)                   # least squares of x1 on rows 2, 3
    assert np.allclose(bounded_lsq(a, b), free)


def test_minimax_line_equioscillates_and_respects_bounds():
    # y = 0, 1, 0 at t = 0, 1, 2: the best line is flat at 0.5, every row 0.5 off
    a = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    b = np.array([0.0, 1.0, 0.0])
    slope, icept = minimax(a, b)
    assert slope == pytest.approx(0.0, abs=1e-3) and icept == pytest.approx(0.5, abs=1e-3)
    # the intercept held at most 0.2: it sits there, and the slope 0.2 leaves rows 1 and 2
    # 0.6 off (|0.2 + 0.2 - 1|, |0.4 + 0.2|)
    x = minimax(a, b, hi=np.array([np.inf, 0.2]))
    assert x[1] == pytest.approx(0.2) and x[0] == pytest.approx(0.2, abs=1e-3)
    assert np.abs(a @ x - b).max() == pytest.approx(0.6, abs=1e-3)


def _floor(y, tol):
    """A constant floor c against rows y: residuals relative to each row's tolerance."""
    y, tol = np.asarray(y), np.asarray(tol)
    return lambda x: (x[0] - y) / (y * tol)


def test_refine_moves_a_floor_least_to_take_in_one_slow_row():
    # p5's small sizes: 8-16 B at 12.9 us, 32 B once at 22.25, then 14.5-15.5; a mean fit
    # sits at 15.2 and leaves 32 B 31.7% off (30% allowed). Within 0.95 of 30% of every
    # row: c from 22.25 * (1 - 0.285) = 15.91 to 12.9 * 1.285 = 16.58.
    res = _floor([12.9, 12.88, 22.25, 14.48, 15.47], [0.3] * 5)
    x = refine(res, np.array([15.2]), np.array([0.0]), np.array([50.0]), np.array([0.5]),
               target=0.95)
    assert np.abs(res(x)).max() <= 0.96               # the penalty leaves a hair over
    assert 15.9 <= x[0] <= 16.1                         # the least change, not the middle
    # already within: nothing moves
    inside = refine(res, np.array([16.2]), np.array([0.0]), np.array([50.0]),
                    np.array([0.5]), target=0.95)
    assert inside[0] == 16.2


def test_within_refuses_what_no_parameter_reaches_and_searches_ratios_in_log():
    res = _floor([10.0, 20.0], [0.15, 0.15])            # 10 and 20 within 15% of one c: no
    x, worst = within(res, np.array([15.0]), np.array([0.0]), np.array([100.0]),
                      np.array([False]), 0.95, 0.98)
    assert x is None and worst > 1.0
    # a start outside the bounds is left to the caller's refusal
    x, _ = within(res, np.array([-1.0]), np.array([0.0]), np.array([100.0]),
                  np.array([False]), 0.95, 0.98)
    assert x is None
    # a rate (ratio) bounded by 1: 2 us of work over rows timed 2.2 and 3.1 us
    res = (lambda x: (2.0 / x[0] - np.array([2.2, 3.1])) / (np.array([2.2, 3.1]) * 0.3))
    x, worst = within(res, np.array([0.95]), np.array([0.03]), np.array([1.0]),
                      np.array([True]), 0.95, 0.98)
    assert x is not None and x[0] <= 1.0 and worst <= 0.98
    assert abs(2.0 / x[0] - 3.1) <= 0.95 * 0.3 * 3.1 + 1e-6


def test_refine_moves_the_parameter_that_is_not_stiff_where_two_trade():
    # two latencies that only add (a -g N log's fixed cost and launch): either takes the row
    # in; the stiff one (a fixed cost the log cannot tell) stays put
    y = np.array([11.0, 13.0])                          # one sum 11.15-12.57 takes both
    res = (lambda x: (x[0] + x[1] - y) / (y * 0.15))
    lo, hi, steps = np.zeros(2), np.full(2, 50.0), np.full(2, 0.5)
    for stiff, still in (([1.0, 10.0], 1), ([10.0, 1.0], 0)):
        x = refine(res, np.array([4.0, 4.0]), lo, hi, steps, target=0.95, stiff=np.array(stiff))
        assert np.abs(res(x)).max() <= 0.96
        assert abs(x[still] - 4.0) < 0.2 < abs(x[1 - still] - 4.0)


def test_within_reports_a_start_outside_the_bounds_at_its_values_not_their_logs():
    # a rate of 1.0 (log 0) beside a fixed cost beyond its bound: the residuals are taken at
    # rate 1.0, where a rate of 0 (its log) would divide by zero
    def res(x):
        return (2.0 / x[0] + x[1] - np.array([4.0, 4.0])) / (np.array([4.0, 4.0]) * 0.3)
    x, worst = within(res, np.array([1.0, 50.0]), np.array([0.03, 0.0]),
                      np.array([1.0, 30.0]), np.array([True, False]), 0.95, 0.98)
    assert x is None and worst == pytest.approx((2.0 + 50.0 - 4.0) / 1.2)
