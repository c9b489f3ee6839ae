"""NCCL's ring on our machine files against published nccl-tests / rccl-tests runs.

At the largest size of each published single-node allreduce run
(tests/data/nccl_tests, sources in its README), the simulated busbw of the
``nccl_ring`` library program on the matching machine file is within 25%.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from msccl_py import library
from msccl_py.simulate import simulate
from msccl_py.tuning.logs import read_log

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"


@pytest.mark.parametrize("log_name,machine", [
    ("a100_all_reduce_gcm.txt", "dgx-a100"),
    ("mi300x_all_reduce_rccl.txt", "mi300x"),
    ("v100_dgx1_all_reduce_old_layout.txt", "dgx1")])
def test_nccl_ring_busbw_at_the_largest_measured_size(log_name, machine):
    log = read_log(DATA / log_name)
    largest = log.rows[-1]
    alg = library.compile("nccl_ring", log.nranks, topology=machine, use_cache=False)
    predicted = simulate(alg, machine, largest.size)[0].busbw_GBps
    assert predicted == pytest.approx(largest.busbw, rel=0.25), (
        f"{machine}: predicted {predicted:.1f} GB/s, measured {largest.busbw} GB/s")
