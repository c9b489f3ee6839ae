"""Proxy transfers sharing resources max-min fairly as they start and end."""

from __future__ import annotations

import math

import pytest

from msccl_py.simulate.flows import Flows


def test_max_min_fair_shares():
    # a crosses both resources; b only the first (10 B/us), c only the second (4 B/us):
    # the second is the tighter, a and c get 2 each, b takes the 8 the first has left
    f = Flows([10.0, 4.0])
    f.start("a", 20.0, (0, 1))
    f.start("b", 80.0, (0,))
    f.start("c", 40.0, (1,))
    assert f.next_done() == (pytest.approx(10.0), "a")      # 20 bytes at 2 B/us
    f.advance(10.0)
    f.finish("a")
    # b has 0 bytes left (80 at 8 B/us) and c 20 bytes, now alone at 4 B/us
    t, fid = f.next_done()
    assert (t, fid) == (pytest.approx(10.0), "b")
    f.finish("b")
    assert f.next_done() == (pytest.approx(15.0), "c")


def test_a_transfer_alone_has_the_resource_to_itself():
    f = Flows([50.0])
    f.start("x", 100.0, (0,))
    assert f.next_done() == (pytest.approx(2.0), "x")


def test_started_later_shares_from_then_on():
    f = Flows([10.0])
    f.start("a", 100.0, (0,))
    f.advance(5.0)                       # a alone: 50 bytes moved
    f.start("b", 25.0, (0,))             # then 5 B/us each
    assert f.next_done() == (pytest.approx(10.0), "b")
    f.advance(10.0)
    f.finish("b")
    assert f.next_done() == (pytest.approx(12.5), "a")   # 25 bytes left at 10 B/us


def test_nothing_in_flight_and_no_resources():
    f = Flows([1.0])
    assert f.next_done() is None and len(f) == 0
    f.start("free", 1e9, ())              # crosses nothing: done at once
    t, _ = f.next_done()
    assert t == 0.0 and not math.isnan(t)
