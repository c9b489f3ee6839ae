"""NCCL's ring on our machine files against published nccl-tests / rccl-tests runs.

At the largest size of each published single-node allreduce run
(tests/data/nccl_tests, sources in its README), ``msccl-py simulate nccl_ring
--ranks 8 --topology T`` with no other parameters (the ring built for T, run as
NCCL runs that size) predicts a busbw within 25% of the measured one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msccl_py.cli import main
from msccl_py.tuning.logs import read_log

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"


@pytest.mark.parametrize("log_name,machine", [
    ("a100_all_reduce_gcm.txt", "dgx-a100"),
    ("mi300x_all_reduce_rccl.txt", "mi300x"),
    ("mi300x_all_reduce_rocm_blog.txt", "mi300x"),
    ("v100_dgx1_all_reduce_old_layout.txt", "dgx1")])
def test_nccl_ring_busbw_at_the_largest_measured_size(log_name, machine, capsys):
    log = read_log(DATA / log_name)
    largest = log.rows[-1]
    assert main(["simulate", "nccl_ring", "--ranks", "8", "--topology", machine,
                 "--sizes", str(largest.size), "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)[0]["busbw_GBps"]
    assert predicted == pytest.approx(largest.busbw, rel=0.25), (
        f"{machine}: predicted {predicted:.1f} GB/s, measured {largest.busbw} GB/s")
