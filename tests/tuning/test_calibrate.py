"""Calibration recovers α and β from synthetic ring logs and fits published ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from msccl_py.errors import LogError
from msccl_py.topologies import loads
from msccl_py.tuning.calibrate import calibrated_text, fit_logs, predict_us
from msccl_py.tuning.logs import parse_text, read_log

from nccl_logs import ring_log

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"


@pytest.mark.parametrize("machine,share", [("mi300x", 7), ("dgx-a100", 12), ("dgx1", 6)])
def test_recovers_alpha_and_beta_within_five_percent(machine, share):
    alpha, beta = 0.9, 37.0
    text = ring_log("allreduce", 8, alpha, beta, share, noise=0.03, seed=1)
    cal = fit_logs([parse_text(text, "synthetic")], machine)
    assert cal.share == share
    assert cal.beta_GBps == pytest.approx(beta, rel=0.05)
    assert cal.alpha_us == pytest.approx(alpha, rel=0.05)


def test_separates_fixed_latency_and_protocols_across_logs():
    alpha, base, beta = 0.6, 5.0, 50.0
    logs = [ring_log("allreduce", 8, alpha, beta, 7, base_us=base, noise=0.02, seed=2),
            ring_log("allgather", 8, alpha, beta, 7, base_us=base, noise=0.02, seed=3),
            ring_log("allreduce", 8, 0.3, beta, 7, efficiency=0.5, base_us=2.0, seed=4,
                     env="NCCL_PROTO=LL ./build/all_reduce_perf")]
    parsed = [parse_text(logs[0], "ar"), parse_text(logs[1], "ag"), parse_text(logs[2], "ll")]
    cal = fit_logs(parsed, "mi300x")
    simple, ll = cal.protocols["Simple"], cal.protocols["LL"]
    assert simple.base_us == pytest.approx(base, rel=0.1)
    assert simple.alpha_us == pytest.approx(alpha, rel=0.05)
    assert cal.beta_GBps == pytest.approx(beta, rel=0.05)
    assert ll.efficiency == pytest.approx(0.5, rel=0.05)
    assert ll.alpha_us == pytest.approx(0.3 + 2.0 / 14, rel=0.05)  # one hop count: base folds in
    assert predict_us(cal, "allreduce", 8, 1 << 30) == pytest.approx(
        5.0 + 14 * 0.6 + (1 << 30) * 1.75 / (7 * 50e3), rel=0.05)


@pytest.mark.parametrize("name,machine,measured", [
    ("a100_all_reduce_gcm.txt", "dgx-a100", 231.72),
    ("mi300x_all_reduce_rccl.txt", "mi300x", 315.69),
    ("v100_dgx1_all_reduce_old_layout.txt", "dgx1", 129.14)])
def test_published_logs_fit_at_large_sizes(name, machine, measured):
    log = read_log(DATA / name)
    log.rows = [r for r in log.rows if r.size >= 1 << 24]
    cal = fit_logs([log], machine)
    assert all(abs(p.error) < 0.15 for p in cal.protocols["Simple"].points)
    largest = log.rows[-1]
    model = predict_us(cal, "allreduce", 8, largest.size)
    assert largest.size * 1.75 / model / 1e3 == pytest.approx(measured, rel=0.05)


def test_calibrated_file_loads_with_the_fitted_numbers():
    text = ring_log("allreduce", 8, 1.5, 20.0, 12, noise=0.01)
    cal = fit_logs([parse_text(text, "a100.log")], "dgx-a100")
    out = calibrated_text(cal, ["a100.log"])
    assert out.startswith("# Calibrated by `msccl-py calibrate` from a100.log")
    topo = loads(out)
    edge = topo.graph.edges[0, 1]
    assert edge["bw"] == pytest.approx(12 * cal.beta_GBps, rel=1e-3)
    assert edge["latency"] == pytest.approx(cal.alpha_us, rel=1e-3)


def test_mismatched_rank_count_and_tree_logs_are_refused():
    log = parse_text(ring_log("allreduce", 4, 1.0, 10.0, 3), "four.log")
    with pytest.raises(LogError, match="four.log: the log has 4 ranks, topology 'mi300x' 8"):
        fit_logs([log], "mi300x")
    tree = parse_text(ring_log("allreduce", 8, 1.0, 10.0, 7, env="NCCL_ALGO=Tree"), "tree.log")
    with pytest.raises(LogError, match="NCCL_ALGO=Tree; calibration fits ring runs"):
        fit_logs([tree], "mi300x")
