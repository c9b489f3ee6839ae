"""``msccl-py topology bound`` and ``msccl-py synthesize`` from the command line."""

from __future__ import annotations

import json

import pytest

from msccl_py.cli import main
from msccl_py.targets.msccl import read_xml


def test_topology_bound_text(capsys):
    assert main(["topology", "bound", "mi250", "--collective", "allgather"]) == 0
    out = capsys.readouterr().out
    assert "largest algbw        333.33 GB/s" in out
    assert "tightest cut         ranks 2-7: 250 GB/s egress for 6 ranks' data" in out


def test_topology_bound_json(capsys):
    assert main(["topology", "bound", "dgx-a100", "--nodes", "2", "--collective", "allreduce",
                 "--json", "--size", "1MiB"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["algbw_GBps"] == pytest.approx(173.333, rel=1e-4)
    assert doc["busbw_GBps"] == pytest.approx(doc["algbw_GBps"] * 2 * 15 / 16)
    assert doc["cut"] == list(range(1, 16))
    assert doc["bytes"] == 1 << 20
    assert [c["direction"] for c in doc["cuts"]] == ["ingress", "egress"]
    # every rank alike both ways: overlapping the phases gains nothing here
    assert doc["any_form"]["algbw_GBps"] == pytest.approx(doc["algbw_GBps"], rel=1e-6)
    assert doc["any_form"]["busbw_GBps"] == pytest.approx(doc["busbw_GBps"], rel=1e-6)


def test_topology_bound_takes_the_machine_as_topology_option(capsys):
    assert main(["topology", "bound", "--topology", "mi250", "--collective", "allgather"]) == 0
    by_option = capsys.readouterr().out
    assert main(["topology", "bound", "mi250", "--collective", "allgather"]) == 0
    assert capsys.readouterr().out == by_option
    assert main(["topology", "bound", "mi250", "--topology", "dgx-a100",
                 "--collective", "allgather"]) == 2
    assert "two machines given" in capsys.readouterr().err
    assert main(["topology", "bound", "--collective", "allgather"]) == 2
    assert "name the machine" in capsys.readouterr().err


def test_topology_bound_any_form_line(capsys, tmp_path):
    from synth_machines import TEXTS
    path = tmp_path / "mixed8.topo"
    path.write_text(TEXTS["mixed8"][0])
    assert main(["topology", "bound", str(path), "--collective", "allreduce"]) == 0
    out = capsys.readouterr().out
    assert "largest algbw                  18.29 GB/s" in out
    assert "any form (phases overlapped)   largest algbw 32.00 GB/s (cut)" in out


def test_topology_bound_refuses_unitless_machines(capsys):
    assert main(["topology", "bound", "amd8", "--collective", "allgather"]) == 2
    assert "gives link counts, not bandwidths" in capsys.readouterr().err


@pytest.mark.parametrize("ext", [".xml"] + [pytest.param(e, marks=pytest.mark.slow)
                                            for e in (".py", ".json")])
def test_synthesize_writes_each_form(highs, tmp_path, capsys, ext):
    out = tmp_path / f"ag{ext}"
    assert main(["synthesize", "--collective", "allgather", "--topology", "dgx-h100",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"wrote {out}: allgather on dgx-h100") and "of the bound" in err
    text = out.read_text()
    if ext == ".xml":
        alg = read_xml(str(out))
        assert (alg.collective, alg.ngpus) == ("allgather", 8)
        # the sizes MSCCL runs it at: float32 element counts its chunks per loop divide
        assert f"{alg.nchunksperloop} chunks per loop" in err
    elif ext == ".py":
        assert main(["compile", "-o", str(tmp_path / "again.xml"), str(out)]) == 0
        assert read_xml(str(tmp_path / "again.xml")).collective == "allgather"
    else:
        assert json.loads(text)["collective"] == "allgather"


@pytest.mark.slow
def test_synthesize_for_a_size(highs, tmp_path, capsys):
    out = tmp_path / "ar.xml"
    assert main(["synthesize", "--collective", "allreduce", "--topology", "dgx-h100",
                 "--for", "64KiB", "-o", str(out)]) == 0
    assert "at 64 KiB" in capsys.readouterr().err


def test_synthesize_errors(tmp_path, capsys):
    assert main(["synthesize", "--collective", "allgather", "--topology", "dgx1",
                 "-o", str(tmp_path / "x.txt")]) == 2
    assert "extension says what to write" in capsys.readouterr().err
    assert main(["synthesize", "--collective", "allgather", "--topology", "dgx1",
                 "--for", "fast", "-o", str(tmp_path / "x.xml")]) == 2
    assert "error:" in capsys.readouterr().err


def test_synthesize_says_how_it_compares_with_nccls_own_choice():
    from msccl_py.cli.synthesize import versus_nccl
    slow = versus_nccl("dgx-h100", "allreduce", None, 1 << 30, 1e6)
    assert slow.startswith("NCCL's own choice (NVLS/Simple x16) is faster")
    fast = versus_nccl("dgx-a100", "allgather", None, 1 << 30, 1.0)
    assert "faster than NCCL's own choice (Ring/Simple x24" in fast
