"""``msccl-py simulate nccl``, ``--compare nccl``, ``--gpus-per-process`` and the size warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msccl_py.cli import main

AP4LL = Path("corpus") / "xml" / "msccl-scheduler__ndv4__ap4ll.xml"


def _run(capsys, *argv):
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_says_what_nccl_runs(capsys):
    code, out, _ = _run(capsys, "nccl", "--topology", "dgx-h100", "--sizes", "1KiB,1GiB")
    assert code == 0
    assert "Ring/LL x1" in out and "NVLS/Simple x16" in out


def test_json_rows_and_collective(capsys):
    code, out, _ = _run(capsys, "nccl", "--topology", "dgx-a100", "--collective", "allgather",
                        "--sizes", "1MiB", "--json")
    row, = json.loads(out)
    assert code == 0 and row["algorithm"] == "Ring" and row["channels"] >= 1
    assert {"bytes", "time_us", "algbw_GBps", "busbw_GBps", "protocol"} <= set(row)


def test_ranks_other_than_the_machine_are_refused(capsys):
    """NCCL runs on every GPU simulated: a --ranks it would not honour is an error, not
    silently 8."""
    code, out, err = _run(capsys, "nccl", "--topology", "dgx-h100", "--ranks", "1")
    assert code == 2 and out == ""
    assert err.startswith("error: nccl runs on every GPU of the machine simulated (8)")
    assert _run(capsys, "nccl", "--topology", "dgx-h100", "--ranks", "8", "--sizes",
                "1MiB")[0] == 0


def test_a_files_ranks_are_its_own(capsys, shared_dir):
    code, out, err = _run(capsys, str(shared_dir / AP4LL), "--topology", "dgx-h100",
                          "--ranks", "3", "--sizes", "1MiB")
    assert code == 2 and out == "" and "has 8 ranks, not --ranks 3" in err


def test_collective_is_for_nccl_only(capsys):
    code, _, err = _run(capsys, "allreduce_ring", "--topology", "dgx-a100", "--collective",
                        "allgather", "--sizes", "1MiB")
    assert code == 2 and "--collective" in err


def test_gpus_per_process_adds_launches(capsys):
    _, out1, _ = _run(capsys, "nccl", "--topology", "dgx-a100", "--sizes", "8", "--json")
    _, out8, _ = _run(capsys, "nccl", "--topology", "dgx-a100", "--sizes", "8", "--json",
                      "--gpus-per-process", "8")
    # NCCL 2.9.6 on launches each GPU's kernel in turn; nccl-tests' back-to-back calls
    # overlap them with the GPUs' work (dgx-a100: 'launch 3.8 us overlapped')
    t1, t8 = json.loads(out1)[0]["time_us"], json.loads(out8)[0]["time_us"]
    assert t1 < 8 * 3.8 and t8 == pytest.approx(8 * 3.8)
    code, _, err = _run(capsys, "nccl", "--topology", "dgx-a100", "--gpus-per-process", "0")
    assert code == 2 and "at least 1" in err


def test_ap4ll_ranks_against_nccl_on_hopper(capsys, shared_dir):
    """MSCCL's all-pairs LL allreduce wins small sizes and loses 1 GiB, where it reaches no
    more than 150 GB/s busbw (NCCL's Hopper LL total is 141); it warns outside its sizes."""
    ap4ll = shared_dir / AP4LL
    for machine in ("dgx-h100", "ndv5"):
        code, out, err = _run(capsys, str(ap4ll), "--topology", machine, "--sizes",
                              "1KiB,32KiB,1GiB", "--compare", "nccl", "--json")
        ap, nccl = (run["results"] for run in json.loads(out))
        assert code == 0
        assert ap[0]["time_us"] < nccl[0]["time_us"] and ap[1]["time_us"] < nccl[1]["time_us"]
        assert ap[2]["time_us"] > nccl[2]["time_us"] and ap[2]["busbw_GBps"] <= 150
        assert "warning:" in err and "maxBytes" in err and "1 GiB" in err


def test_no_warning_inside_the_range(capsys, shared_dir):
    _, _, err = _run(capsys, str(shared_dir / AP4LL), "--topology", "dgx-h100", "--sizes", "64KiB")
    assert "warning" not in err


def test_gpus_per_process_applies_to_every_target(capsys):
    _, one, _ = _run(capsys, "allreduce_ring", "--topology", "dgx1", "--sizes", "1KiB",
                     "--json")
    _, four, _ = _run(capsys, "allreduce_ring", "--topology", "dgx1", "--sizes", "1KiB",
                      "--json", "--gpus-per-process", "4")
    a, b = json.loads(one)[0], json.loads(four)[0]
    assert b["time_us"] - a["time_us"] == pytest.approx(3 * 3.8)
    assert b["busbw_GBps"] < a["busbw_GBps"]


def test_ap4ll_on_ampere_pays_the_generations_latency_as_nccl_does(capsys, shared_dir):
    """On ndv4 (A100, NVLink) --compare nccl times both with Ampere's kernel latencies: the
    XML's LL call costs at least Ampere's LL fixed cost (10.6 us) plus its two NVLink hops
    (0.73 each), NCCL's ring its 10.6 + 14 x 0.73; ap4ll still wins small sizes."""
    code, out, _ = _run(capsys, str(shared_dir / AP4LL), "--topology", "ndv4", "--sizes",
                        "1KiB,32KiB", "--compare", "nccl", "--json")
    ap, nccl = (run["results"] for run in json.loads(out))
    assert code == 0
    assert ap[0]["time_us"] >= 10.6 + 2 * 0.73
    assert nccl[0]["time_us"] >= 10.6 + 14 * 0.73
    assert ap[0]["time_us"] < nccl[0]["time_us"] and ap[1]["time_us"] < nccl[1]["time_us"]
