"""Calibration as NCCL itself runs each size: physical fits, launch apart, cross-validation."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from msccl_py.errors import LogError
from msccl_py.simulate import machine_model
from msccl_py.topologies import load
from msccl_py.tuning import calibrate_nccl as cn
from msccl_py.tuning.logs import Log, Row, read_log
from msccl_py.tuning.nccl_model import nvls_graph
from msccl_py.tuning.nccl_sim import simulate_nccl

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
SIZES = [1 << k for k in range(6, 31, 2)]      # 64 B .. 1 GiB


def _log(name, *, nodes=1, g=1, scale=1.0, bases=None, launch=None, net=None, source=None,
         proto=None, shares=None, msccl=None, overlapped=False, nvls_step=None):
    """A log made by ``simulate nccl`` itself on ``name`` with known parameters."""
    topo = load(name, nodes=nodes if nodes > 1 else None)
    m = machine_model(topo)
    protos = {k: replace(v, base_us=(bases or {}).get(k, v.base_us))
              for k, v in m.protocols.items()}
    m = replace(m, protocols=protos, launch_us=m.launch_us if launch is None else launch,
                network_latency_us=m.network_latency_us if net is None else net,
                bw_shares=dict(shares or {}), msccl=dict(msccl or {}),
                launch_overlapped=overlapped, nvls_step_us=nvls_step)
    if scale != 1.0:
        m = m.with_bandwidth_scale(scale)
    res = simulate_nccl(topo, "allreduce", SIZES, gpus_per_process=g, machine=m, protocol=proto)
    rows = [Row(r.bytes, r.time_us, r.algbw_GBps, r.busbw_GBps, line=k + 1)
            for k, r in enumerate(res)]
    log = Log(source or f"{name}-g{g}-n{nodes}", "allreduce", topo.num_nodes(), None, proto, rows)
    log.gpus_per_process = g
    return log


def _worst(rows):
    return max(abs(r.error) for r in rows)


def test_recovers_scale_fixed_cost_and_launch_apart(tmp_path):
    made = dict(scale=0.9, bases={"LL": 9.0, "LL128": 16.0, "Simple": 12.0}, launch=6.0)
    logs = [_log("dgx-a100", g=1, **made), _log("dgx-a100", g=8, **made)]
    fit = cn.fit_nccl(logs, "dgx-a100")
    assert fit.bandwidth_scale == pytest.approx(0.9, rel=0.02)
    assert fit.launch_us == pytest.approx(6.0, rel=0.05)
    for proto, base in fit.bases.items():
        assert base == pytest.approx(made["bases"][proto], abs=0.5)
    out = tmp_path / "a100.topo"
    out.write_text(cn.calibrated_text(fit, ["a", "b"]))
    rows = cn.round_trip(fit, logs, out)
    assert len(rows) == 2 * len(SIZES) and _worst(rows) < 0.02
    text = out.read_text()
    assert re.search(r"\n  bandwidth scale 0\.(89|90)\d*\n", text)
    assert re.search(r"\n  launch (5\.9|6\.0)\d* us\n", text)


def test_protocol_bandwidth_share_is_fitted_written_and_simulated(tmp_path):
    # LL and LL128 running below NCCL's budgets (as on OCI's A100s), Simple at it
    made = dict(scale=0.95, shares={"LL": 0.5, "LL128": 0.7})
    log = _log("dgx-a100", **made)
    fit = cn.fit_nccl([log], "dgx-a100")
    assert fit.shares["LL"] == pytest.approx(0.5, rel=0.05)
    # two LL128 sizes (4 and 16 MiB) tell its share and fixed cost apart only roughly
    assert fit.shares["LL128"] == pytest.approx(0.7, rel=0.1)
    assert "Simple" not in fit.shares and "MSCCL" not in fit.shares
    out = tmp_path / "a100.topo"
    out.write_text(cn.calibrated_text(fit, ["x"]))
    text = out.read_text()
    assert re.search(r"\n  bandwidth scale LL 0\.(49|50)\d*\n", text)
    assert re.search(r"\n  bandwidth scale LL128 0\.[67]\d*\n", text)
    assert _worst(cn.round_trip(fit, [log], out)) < 0.05
    # without the shares the same fit misses the LL and LL128 sizes by far
    plain = replace(fit, shares={})
    assert _worst(cn.predict(plain, [log])) > 0.2


def test_shares_never_exceed_one():
    # a log whose LL runs faster than NCCL's budget: the share stays at 1 (none written)
    fit = cn.fit_nccl([_log("dgx-a100", scale=0.9, shares={"LL": 1.0})], "dgx-a100")
    assert fit.shares == {}


def test_launch_from_g8_logs_transfers_to_one_process_per_gpu():
    # only -g 8 runs: the fixed costs stay NCCL's and the launch takes the rest, so the
    # fitted machine predicts a one-process-per-GPU run of the same machine
    g8 = _log("dgx-a100", g=8, launch=7.0)
    fit = cn.fit_nccl([g8], "dgx-a100")
    assert fit.bases == {} and fit.launch_us == pytest.approx(7.0, rel=0.05)
    assert any("fixed costs keep the file's values" in n for n in fit.notes)
    per_gpu = _log("dgx-a100", g=1, launch=7.0)
    assert _worst(cn.predict(fit, [per_gpu])) < 0.02
    # the g=8 log's smallest size is 7 launches slower than the per-GPU one
    assert g8.rows[0].time_us - per_gpu.rows[0].time_us == pytest.approx(49.0, rel=0.01)


@pytest.mark.slow
def test_msccl_kernels_fixed_cost_and_launch_are_fitted_apart(tmp_path):
    # RCCL's MSCCL kernels (1 KiB - 16 MiB on 8 MI300X) with their own fixed costs and a
    # launch of their own (mscclSetupKernel's host path), the ring with RCCL's
    made = dict(scale=0.95, launch=2.5, msccl={"LL": 10.0, "Simple": 13.0, "launch": 4.5})
    logs = [_log("mi300x", g=1, **made), _log("mi300x", g=8, **made)]
    fit = cn.fit_nccl(logs, "mi300x")
    assert fit.launch_us == pytest.approx(2.5, abs=0.1)
    for key, us in made["msccl"].items():
        assert fit.msccl[key] == pytest.approx(us, abs=0.3), key
    out = tmp_path / "mi300x.topo"
    out.write_text(cn.calibrated_text(fit, ["a", "b"]))
    text = out.read_text()
    assert re.search(r"\n  launch MSCCL 4\.[45]\d* us\n", text)
    assert re.search(r"\n  msccl Simple base 1[23](\.\d+)? us\n", text)
    assert _worst(cn.round_trip(fit, logs, out)) < 0.03
    # calibrating the calibrated file replaces the fitted statements, not adds to them
    again = cn.calibrated_text(replace(fit, topology=load(str(out))), ["c"])
    assert again.count("launch MSCCL") == 1 and again.count("msccl Simple base") == 1
    # one launch time for both kernels misses the -g 8 run's MSCCL sizes
    one = {k: v for k, v in fit.msccl.items() if k != "launch"}
    assert _worst(cn.predict(replace(fit, msccl=one), logs[1:])) > 0.2


@pytest.mark.slow
def test_scale_is_fitted_from_rccls_own_algorithms_not_its_msccl_kernels():
    # a log that stops at 128 MiB has RCCL's MSCCL kernels among its largest sizes (8-16
    # MiB): their share, not the machine's scale, takes what they run below RCCL's budget
    log = _log("mi300x", scale=0.95, shares={"MSCCL": 0.75})
    log.rows = [r for r in log.rows if r.size <= 1 << 27]
    fit = cn.fit_nccl([log], "mi300x")
    assert fit.bandwidth_scale == pytest.approx(0.95, rel=0.02)
    assert fit.shares["MSCCL"] == pytest.approx(0.75, rel=0.05)


def test_unphysical_msccl_fits_are_refused():
    fit = cn.NcclFit(load("mi300x"), "mi300x", 0.9, {}, msccl={"Simple": -2.0, "launch": 60.0})
    with pytest.raises(LogError, match=r"a launch of RCCL's MSCCL kernels of 60 us \(0 to 38 "
                                       r"is physical\).*a fixed cost of -2 us for RCCL's MSCCL "
                                       r"Simple kernels \(RCCL's own is 17 us; 0 to 68"):
        cn.check_physical(fit)


def test_a_share_caps_the_total_not_a_lone_channel():
    # LL at half NCCL's budget (its llMaxBws total): a 32 KiB call runs on one channel at
    # that channel's speed, which is below half the total
    fit = cn.fit_nccl([_log("dgx-a100", shares={"LL": 0.5})], "dgx-a100")
    small = [r for r in cn.predict(fit, [_log("dgx-a100", shares={"LL": 0.5})])
             if r.protocol == "LL"]
    assert max(abs(r.error) for r in small) < 0.05
    full = simulate_nccl("dgx-a100", "allreduce", [32 << 10])[0]
    m = replace(machine_model(load("dgx-a100")), bw_shares={"LL": 0.5})
    half = simulate_nccl("dgx-a100", "allreduce", [32 << 10], machine=m)[0]
    assert full.channels == 1 and half.time_us == pytest.approx(full.time_us)


def test_launches_that_overlap_back_to_back_calls_are_told_from_added_ones(tmp_path):
    # -g 8 runs whose launches hide behind longer calls (Voltage Park's H100, Azure's
    # MI300X) against runs that add them (OCI's A100): each fit keeps the mode its log shows
    for overlapped in (True, False):
        log = _log("dgx-a100", g=8, launch=4.0, scale=0.95, overlapped=overlapped)
        fit = cn.fit_nccl([log], "dgx-a100")
        assert fit.launch_overlapped is overlapped
        assert fit.launch_us == pytest.approx(4.0, rel=0.05)
        out = tmp_path / "a100.topo"
        out.write_text(cn.calibrated_text(fit, ["x"]))
        # the file's last launch line is the fit's (the base file may state its own first)
        last = re.findall(r"^\s*launch [\d.]+ us( overlapped)?\s*$", out.read_text(), re.M)[-1]
        assert bool(last) is overlapped
        assert _worst(cn.round_trip(fit, [log], out)) < 0.02
    # overlapped, a small call takes the 8 launches; a large one the GPUs' time alone
    large = log.rows[-1].time_us          # the last fit's log: launches added
    over = _log("dgx-a100", g=8, launch=4.0, scale=0.95, overlapped=True)
    assert over.rows[0].time_us == pytest.approx(32.0)
    assert over.rows[-1].time_us == pytest.approx(large - 28.0)


def test_rows_of_zero_bytes_are_skipped():
    log = _log("dgx-a100")
    log.rows.insert(0, Row(0, 0.36, 0.0, 0.0, line=0))
    fit = cn.fit_nccl([log], "dgx-a100")
    assert fit.notes[0].endswith("1 row(s) of 0 bytes skipped")
    rows = cn.predict(fit, [log])
    assert [r.size for r in rows] == SIZES and _worst(rows) < 0.02


def test_faster_links_are_refused():
    with pytest.raises(LogError, match=r"refused: the logs would need links 1\.[34]\d*x faster "
                                       r"than the file's \('dgx-a100'\)"):
        cn.fit_nccl([_log("dgx-a100", scale=1.4)], "dgx-a100")


def test_fixed_cost_far_beyond_the_hop_model_is_refused():
    with pytest.raises(LogError, match=r"a Simple fixed cost of 1[45]\d us, far beyond the hop "
                                       r"model \(NCCL's own is 8.4 us; above 33.6"):
        # as NCCL_PROTO=Simple runs every size: the fixed cost shows at all of them
        cn.fit_nccl([_log("dgx-a100", bases={"Simple": 150.0}, proto="Simple")], "dgx-a100")


def test_negative_fixed_cost_is_refused():
    log = _log("dgx-a100", bases={"LL": 0.0, "LL128": 0.0, "Simple": 0.0})
    log.rows = [replace(r, time_us=r.time_us / 2) if r.size < 1 << 20 else r
                for r in log.rows]                   # faster than any latency the model has
    with pytest.raises(LogError, match="a negative fixed cost for LL"):
        cn.fit_nccl([log], "dgx-a100")


def test_network_latency_from_two_node_logs():
    # above the 75 us EFA's plugin reports, which every network step pays anyway
    log = _log("p4de", nodes=2, net=120.0)
    fit = cn.fit_nccl([log], "p4de")
    assert fit.network_kind == "efa"
    assert fit.network_latency_us == pytest.approx(120.0, rel=0.05)
    assert re.search(r"\n  network kind efa latency 1(19|20)(\.\d+)? us\n",
                     cn.calibrated_text(fit, ["x"]))


def test_calibrated_file_keeps_model_nvls_nics_and_network_kind(tmp_path):
    fit = cn.fit_nccl([_log("dgx-h100", scale=0.95)], "dgx-h100")
    out = tmp_path / "h100.topo"
    out.write_text(cn.calibrated_text(fit, ["x"]))
    topo, ref = load(str(out)), load("dgx-h100")
    assert topo.model == ref.model and topo.network_kind == "ib"
    assert nvls_graph(topo) is not None
    assert [topo.graph.nodes[n]["bw"] for n in topo.devices("nic")] == [50.0] * 8
    assert machine_model(topo).bw_scale == pytest.approx(fit.bandwidth_scale, rel=1e-3)
    assert simulate_nccl(topo, "allreduce", [1 << 30])[0].algorithm == "NVLS"


def test_nvls_time_per_piece_is_fitted_written_and_read_back(tmp_path):
    made = _log("dgx-h100", scale=0.9, nvls_step=3.0)
    fit = cn.fit_nccl([made], "dgx-h100")
    # the step and the scale both lengthen the large NVLS rows: told apart to a few %
    assert fit.nvls_step_us == pytest.approx(3.0, rel=0.15)
    assert fit.bandwidth_scale == pytest.approx(0.9, rel=0.03)
    out = tmp_path / "h100.topo"
    out.write_text(cn.calibrated_text(fit, ["x"]))
    assert re.search(r"nvls step [\d.]+ us", out.read_text())
    assert machine_model(load(str(out))).nvls_step_us == pytest.approx(fit.nvls_step_us, 1e-3)
    assert _worst(cn.round_trip(fit, [made], out)) < 0.02
    # a log that runs NVLS as NCCL's efficiency says shows no time per piece: none written
    plain = cn.fit_nccl([_log("dgx-h100", scale=0.95)], "dgx-h100")
    assert plain.nvls_step_us is None
    assert any("no time per piece" in n for n in plain.notes)
    assert "nvls step" not in cn.calibrated_text(plain, ["x"])


def test_unphysical_nvls_step_is_refused():
    for step, why in ((30.0, r"an NVLS step of 30 us per piece \(0 to 25"),
                      (-1.0, r"an NVLS step of -1 us per piece")):
        fit = cn.NcclFit(load("dgx-h100"), "dgx-h100", 0.9, {}, nvls_step_us=step)
        with pytest.raises(LogError, match=why):
            cn.check_physical(fit)


def test_a_row_its_own_in_place_time_contradicts_does_not_drag_the_fit(tmp_path):
    clean = _log("dgx-a100", scale=0.9)
    # one slow out-of-place sample at 4 MiB; the same call in place took its usual time
    k = next(i for i, r in enumerate(clean.rows) if r.size == 1 << 22)
    noisy = _log("dgx-a100", scale=0.9)
    row = noisy.rows[k]
    noisy.rows[k] = replace(row, time_us=row.time_us * 1.6, in_place_us=row.time_us)
    fit = cn.fit_nccl([noisy], "dgx-a100", strict=False)
    assert fit.bandwidth_scale == pytest.approx(0.9, rel=0.02)
    out = tmp_path / "a100.topo"
    out.write_text(cn.calibrated_text(fit, ["x"]))
    rows = cn.round_trip(fit, [noisy], out)
    assert [r.size for r in rows if r.noisy] == [1 << 22]
    assert max(abs(r.error) for r in rows if not r.noisy) < 0.02
    stats = cn.error_stats(rows, settled=True)
    assert stats["big"][1] < 0.02 and cn.error_stats(rows)["big"][1] > 0.3


def test_log_with_ncclalgo_and_wrong_rank_count_are_refused():
    log = _log("dgx-a100")
    log.algo = "Tree"
    with pytest.raises(LogError, match="NCCL_ALGO=Tree; NCCL's own choice is fitted"):
        cn.fit_nccl([log], "dgx-a100")
    odd = _log("dgx-a100")
    odd.nranks = 12
    with pytest.raises(LogError, match="12 ranks, not a multiple of 'dgx-a100'"):
        cn.fit_nccl([odd], "dgx-a100")


def test_cross_validation_fits_each_log_and_scores_the_others():
    a = _log("dgx-a100", g=1, scale=0.9, source="a.log")
    b = _log("dgx-a100", g=1, scale=0.9, source="b.log")
    slow = _log("dgx-a100", g=1, scale=0.6, source="slow.log")
    out = cn.cross_validate([a, b, slow], "dgx-a100")
    assert [(x, y) for x, y, _ in out] == [("a.log", "b.log"), ("a.log", "slow.log"),
                                           ("b.log", "a.log"), ("b.log", "slow.log"),
                                           ("slow.log", "a.log"), ("slow.log", "b.log")]
    stats = {(x, y): s for x, y, s in out}
    assert stats["a.log", "b.log"]["big"][1] < 0.02          # same machine: exact
    assert stats["a.log", "slow.log"]["big"][1] > 0.3        # another machine: it shows


def test_published_a100_logs_round_trip_and_transfer(tmp_path):
    # the HGX A100 log (one process per GPU, >= 32 MiB) and OCI's BM.GPU4.8 -g 8 log
    gcm, oci = (read_log(DATA / n) for n in ("a100_all_reduce_gcm.txt",
                                             "oci_bm_gpu4_a100_1node_g8_all_reduce.txt"))
    assert (gcm.gpus_per_process, oci.gpus_per_process) == (1, 8)
    fit = cn.fit_nccl([gcm], "dgx-a100")
    out = tmp_path / "a100.topo"
    out.write_text(cn.calibrated_text(fit, ["gcm"]))
    rows = cn.round_trip(fit, [gcm], out)
    assert _worst(rows) <= 0.15
    big = [abs(r.error) for r in cn.predict(fit, [oci]) if r.size >= 1 << 26]
    assert np.median(big) <= 0.15                          # transfers to the -g 8 run's sizes
    # OCI's LL (0.5-2 MiB) and LL128 (4-16 MiB) run well below NCCL's budgets: their shares
    # take it; without them the round trip misses by 30% (docs/performance-model.md)
    fit = cn.fit_nccl([oci], "bm-gpu4")
    assert fit.shares["LL"] < 0.6 and fit.shares["LL128"] < 0.75
    out.write_text(cn.calibrated_text(fit, ["oci"]))
    stats = cn.error_stats(cn.round_trip(fit, [oci], out))
    assert stats["big"][1] <= 0.20 and stats["small"][1] <= 0.30


def _within(rows, big=0.15, small=0.30):
    """Issue 33's bounds: worst |error| 15% from 64 KiB, 30% below."""
    stats = cn.error_stats(rows)
    return all(stats[k] is None or stats[k][1] <= b for k, b in (("big", big), ("small", small)))


@pytest.mark.slow
def test_mi300x_round_trips_and_transfers_to_another_system_and_launch(tmp_path):
    # the AAC MI300X log and the ROCm blog's (another system), both one process per GPU,
    # and AMD's validation run on a Supermicro MI300X launched -g 8; RCCL's MSCCL rows run
    # on the event engine (minutes)
    rccl, blog, g8 = (read_log(DATA / n) for n in (
        "mi300x_all_reduce_rccl.txt", "mi300x_all_reduce_rocm_blog.txt",
        "mi300x_all_reduce_g8_rocm_validation.txt"))
    for log, other in ((rccl, blog), (blog, rccl)):
        fit = cn.fit_nccl([log], "mi300x")
        # RCCL's MSCCL Simple kernels at 4-16 MiB run at about 3/4 of its xGMI budget, and
        # cost less per call than RCCL's 17 us base (their intercept is ~19 us in all)
        assert 0.6 < fit.shares["MSCCL"] < 0.9 and 10 < fit.msccl["Simple"] < 16
        out = tmp_path / "mi300x.topo"
        out.write_text(cn.calibrated_text(fit, [log.source]))
        assert _within(cn.round_trip(fit, [log], out)), log.source
        written = cn.NcclFit(load(str(out)), str(out), 1.0, {})
        assert _within(cn.predict(written, [other])), (log.source, other.source)
        stats = cn.error_stats(cn.predict(written, [g8]))
        assert stats["big"][0] <= 0.05 and stats["small"][0] <= 0.15      # medians
    # the -g 8 run: RCCL's MSCCL kernels are launched by their own, slower host path
    fit = cn.fit_nccl([g8], "mi300x", strict=False)
    assert 1.5 < fit.launch_us < 3.5 and fit.msccl["launch"] > fit.launch_us + 1
    assert cn.error_stats(cn.predict(fit, [rccl, blog]))["big"][1] <= 0.15
    # the refinement brings the -g 8 run's own noisy rows within their bounds by raising
    # the MSCCL kernels' fixed costs, which a -g 8 log cannot tell from their launches, so
    # it carries over to the one-process runs less well (18-22% from 64 KiB): a trade the
    # docs state (calibration, "Still open")
    refined = cn.fit_nccl([g8], "mi300x")
    out = tmp_path / "g8.topo"
    out.write_text(cn.calibrated_text(refined, [g8.source]))
    assert _within(cn.round_trip(refined, [g8], out))
    assert cn.error_stats(cn.predict(refined, [rccl, blog]))["big"][1] <= 0.25


def _slowed(name, size, factor, **made):
    """A log made by ``simulate nccl`` with one out-of-place time ``factor`` times slower
    (its in-place time the true one)."""
    log = _log(name, **made)
    k = next(i for i, r in enumerate(log.rows) if r.size == size)
    log.rows[k] = replace(log.rows[k], time_us=log.rows[k].time_us * factor,
                          in_place_us=log.rows[k].time_us)
    return log


def test_a_row_outside_its_bound_is_taken_in_by_the_least_physical_change(tmp_path):
    # 1 KiB (LL, latency-bound) 45% slow: the mean fit leaves it 31% off (30% allowed);
    # its neighbours leave room, so the refined fit brings every row within its bound
    log = _slowed("dgx-a100", 1 << 10, 1.45, scale=0.9)
    mean = cn.fit_nccl([log], "dgx-a100", strict=False)
    fit = cn.fit_nccl([log], "dgx-a100")
    out = tmp_path / "a100.topo"
    for f in (mean, fit):
        out.write_text(cn.calibrated_text(f, ["x"]))
        rows = cn.round_trip(f, [log], out)
        stats = cn.error_stats(rows)
        within = stats["big"][1] <= 0.15 and stats["small"][1] <= 0.30
        assert within == (f is fit)
    assert any("1 KiB of " in n and "(30% allowed); refined by the least change that brings "
               "every row within 0.9" in n for n in fit.notes)
    assert not any("refined" in n for n in mean.notes)
    # the LL fixed cost took it; the large sizes stay close to their times (the least change)
    assert fit.bases["LL"] > mean.bases["LL"] + 0.3
    assert max(abs(r.error) for r in rows if r.size >= 1 << 26) < 0.03
    cn.check_physical(fit)


def test_a_row_no_physical_parameter_reaches_leaves_the_mean_fit():
    # 64 B three times slower: LL's fixed cost would have to pass NCCL's four-fold bound
    log = _slowed("dgx-a100", 64, 3.0, scale=0.9)
    mean = cn.fit_nccl([log], "dgx-a100", strict=False)
    fit = cn.fit_nccl([log], "dgx-a100")
    assert fit.bases == mean.bases and fit.bandwidth_scale == mean.bandwidth_scale
    assert any("no physical parameters bring every row within" in n for n in fit.notes)
