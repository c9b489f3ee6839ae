"""Ranking on NDv5 that matches published measurements: all-pairs LL wins small, NCCL's ring
wins large (MSCCL's and NCCL's published NDv4/NDv5 allreduce curves cross in between)."""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.simulate import machine_model, simulate
from msccl_py.targets.msccl import read_xml

SIZES = [1 << 10, 32 << 10, 1 << 30]


@pytest.fixture
def ranked(shared_dir):
    m = machine_model("ndv5")
    allpairs = simulate(read_xml(str(shared_dir / "corpus" / "xml"
                                     / "msccl-scheduler__ndv4__ap4ll.xml")), m, SIZES)
    ring = simulate(library.compile("nccl_ring", 8, topology="ndv5"), m, SIZES)
    return dict(zip(SIZES, zip(allpairs, ring)))


@pytest.mark.parametrize("size", [1 << 10, 32 << 10])
def test_allpairs_ll_wins_small_sizes(ranked, size):
    allpairs, ring = ranked[size]
    assert allpairs.protocol == "LL"
    assert allpairs.time_us < ring.time_us
    assert ring.bottleneck.startswith("latency")


def test_ring_wins_at_1GiB(ranked):
    allpairs, ring = ranked[1 << 30]
    assert ring.time_us < allpairs.time_us
    # all-pairs LL is held to NCCL's LL total per Hopper GPU (llMaxBws, 141 GB/s of data),
    # not to the switch ports as when the cap was per threadblock
    assert allpairs.busbw_GBps <= 150
    assert not allpairs.bottleneck.startswith("switch")
