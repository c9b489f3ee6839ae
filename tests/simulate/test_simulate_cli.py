"""``msccl-py simulate`` from the command line (in process: main() with captured output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msccl_py import library
from msccl_py.cli import main
from msccl_py.plan.tables import plan_for
from msccl_py.simulate import JSON_KEYS

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
from msccl_py.language import *
from msccl_py.language.collectives import AllGather
from msccl_py.topologies import fully_connected
with MSCCLProgram("ag2", fully_connected(2), AllGather(2, 1, False), 1):
    for r in range(2):
        c = chunk(r, Buffer.input, 0)
        c.copy(r, Buffer.output, r)
        c.copy(1 - r, Buffer.output, r)
    XML()
'''


def _run(capsys, *argv):
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_library_target_table(capsys):
    code, out, _ = _run(capsys, "allreduce_ring", "--topology", "dgx-h100",
                        "--param", "channels=2", "--sizes", "1KiB,1GiB")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == ("allreduce_ring channels=2: allreduce, Simple, 8 ranks, 2 channels, "
                        "1 instance on dgx-h100 (8 GPUs)")
    assert lines[1].split()[:2] == ["size", "time"]
    small, large = lines[2].split(), lines[3].split()
    assert small[:2] == ["1", "KiB"] and large[:2] == ["1", "GiB"]
    assert " ".join(small[5:]).startswith("latency: 14 hops, ")
    # two channels, one threadblock each at dgx-h100's 30.9 GB/s, are what bounds it
    assert " ".join(large[5:]).startswith("threadblock rank ")
    assert float(large[4]) <= 2 * 30.9 * 1.001


def test_json_prints_only_the_list(capsys):
    code, out, _ = _run(capsys, "allgather_ring", "--topology", "mi300x", "--sizes",
                        "1KiB:8KiB", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [d["bytes"] for d in doc] == [1024, 2048, 4096, 8192]
    assert all(tuple(d) == JSON_KEYS for d in doc)
    d = doc[-1]
    assert d["algbw_GBps"] == pytest.approx(d["bytes"] / (d["time_us"] * 1e3))
    assert d["busbw_GBps"] == pytest.approx(d["algbw_GBps"] * 7 / 8)


def test_xml_and_program_file_targets(tmp_path, capsys):
    xml = tmp_path / "ring.xml"
    xml.write_text(library.compile_xml("allgather_ring", 8))
    prog = tmp_path / "ag2.py"
    prog.write_text(PROGRAM)
    pair = tmp_path / "pair.topo"
    pair.write_text("machine pair { gpus 2 linktype l 25 GB/s link 0 <-> 1 l }")
    code, out, _ = _run(capsys, str(xml), "--topology", "dgx-h100", "--sizes", "1MiB",
                        "--json")
    assert code == 0 and json.loads(out)[0]["bytes"] == 1 << 20
    code, out, _ = _run(capsys, str(prog), "--topology", str(pair), "--sizes", "1MiB")
    assert code == 0 and out.startswith("ag2.py: allgather, Simple, 2 ranks")


def test_compare_side_by_side(capsys):
    code, out, _ = _run(capsys, "allreduce_ring", "--topology", "ndv5", "--sizes",
                        "1KiB,1GiB", "--compare", "allreduce_allpairs",
                        "allreduce_ring:channels=8,protocol=Simple")
    assert code == 0
    assert "  [2] allreduce_ring channels=8: allreduce, Simple, 8 ranks, 8 channels, " \
           "1 instance" in out
    rows = [line for line in out.splitlines() if line.lstrip().startswith("1 ")]
    # all-pairs LL wins small; at 1 GiB eight ring channels beat it, one ring channel
    # (one threadblock at ndv5's 30.9 GB/s) does not
    assert rows[0].endswith("[1]") and rows[1].endswith("[2]")
    code, out, _ = _run(capsys, "allreduce_ring", "--topology", "ndv5", "--sizes", "1KiB",
                        "--compare", "allreduce_allpairs", "--json")
    doc = json.loads(out)
    assert [d["target"] for d in doc] == ["allreduce_ring", "allreduce_allpairs"]


def test_trace_is_chrome_trace_events(tmp_path, capsys):
    out_path = tmp_path / "t.json"
    quad = tmp_path / "quad.topo"
    quad.write_text("machine quad { gpus 4 linktype l 25 GB/s switch s gpus 0-3 port l x4 }")
    code, _, err = _run(capsys, "allgather_ring", "--topology", str(quad),
                        "--sizes", "1KiB,4MiB", "--trace", str(out_path))
    assert code == 0 and f"wrote {out_path}" in err
    doc = json.loads(out_path.read_text())
    events = doc["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X"}
    names = {(e["pid"], e["args"]["name"]) for e in events if e["ph"] == "M"}
    assert (4, "links") in names and (0, "rank 0") in names
    alg = library.compile("allgather_ring", 4)
    plan = plan_for(alg)
    tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X" and e["pid"] < 4}
    assert len(tracks) == plan.nblocks
    slices = [e for e in events if e["ph"] == "X" and e["pid"] < 4]
    assert len(slices) == plan.nsteps * doc["metadata"]["iterations_drawn"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    link_slices = [e for e in events if e["ph"] == "X" and e["pid"] == 4]
    assert link_slices and all("port" in e["args"]["step"] or "rank" in e["args"]["step"]
                               for e in link_slices)


def test_plot_writes_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "busbw.png"
    code, _, _ = _run(capsys, "allgather_ring", "--topology", "dgx-h100", "--sizes",
                      "1KiB:1MiB", "--compare", "allgather_allpairs", "--plot", str(png))
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv,message", [
    (["nope", "--topology", "ndv5"], "unknown program 'nope'"),
    (["allgather_ring", "--topology", "ndv5", "--sizes", "2GiB:1GiB"], "must go up"),
    (["allgather_ring", "--topology", "ndv5", "--ranks", "16"],
     "has 8 GPUs: simulate 2 nodes of the machine (--nodes 2), or build it for 8 ranks"),
    (["missing.xml", "--topology", "ndv5"], "missing.xml"),
])
def test_errors_are_one_line(capsys, argv, message):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


NVIDIA_SMI = REPO / "tests" / "topologies" / "data"
ROCM_SMI = NVIDIA_SMI / "rocm-smi-mi300.txt"


def test_nccl_ring_is_built_for_the_machine_and_run_as_nccl_runs_it(capsys):
    code, out, _ = _run(capsys, "nccl_ring", "--ranks", "8", "--topology", "dgx-a100",
                        "--sizes", "1KiB,4MiB,1GiB")
    assert code == 0
    head, columns, *rows = out.splitlines()
    assert head.startswith("nccl_ring topology=dgx-a100: allreduce, 8 ranks, as NCCL runs "
                           "each size: LL 1 channel to 1 KiB, LL128 12 channels at 4 MiB, "
                           "Simple 12 channels from 1 GiB, 1 instance on dgx-a100")
    assert "NCCL runs" in columns
    assert rows[0].split()[5:7] == ["LL", "x1"]
    big = rows[-1].split()
    assert big[5:7] == ["Simple", "x12"]
    # twelve rings at dgx-a100's 20 GB/s per threadblock, not a generic machine's rings
    assert float(big[4]) == pytest.approx(239.1, rel=0.01)


def test_compare_targets_take_parameters(capsys):
    code, out, _ = _run(capsys, "nccl_ring", "--topology", "dgx-a100", "--sizes", "1GiB",
                        "--compare", "nccl_ring:protocol=LL128,rings=4",
                        "allreduce_ring:channels=8,instances=2")
    assert code == 0
    lines = out.splitlines()
    assert lines[2] == ("  [1] nccl_ring rings=4 topology=dgx-a100: allreduce, LL128, 8 ranks, "
                        "4 channels, 1 instance")
    assert lines[3] == ("  [2] allreduce_ring channels=8: allreduce, Simple, 8 ranks, "
                        "16 channels, 2 instances")


def test_repeated_compare_options_add_up(capsys):
    code, out, _ = _run(capsys, "allreduce_ring", "--topology", "dgx-a100", "--sizes", "1GiB",
                        "--compare", "nccl_ring", "--compare", "allreduce_ring:channels=4")
    assert code == 0
    heads = [line.split(":")[0].strip() for line in out.splitlines()[1:4]]
    assert heads == ["[0] allreduce_ring", "[1] nccl_ring topology=dgx-a100",
                     "[2] allreduce_ring channels=4"]


def test_nvidia_smi_output_with_a_gpu_model(capsys):
    smi = str(NVIDIA_SMI / "dgx-a100-nics.txt")
    code, out, _ = _run(capsys, "allreduce_ring", "--topology", smi, "--gpu-model", "A100",
                        "--sizes", "1GiB", "--param", "channels=8")
    assert code == 0 and out.startswith("allreduce_ring channels=8: allreduce, Simple, 8 ranks")
    assert "on dgx-a100-nics (8 GPUs)" in out


@pytest.mark.parametrize("argv,message", [
    (["allreduce_ring", "--topology", str(NVIDIA_SMI / "dgx-a100-nics.txt")],
     "is `nvidia-smi topo -m` output, which names links but not their speed: give the GPU "
     "model with --gpu-model"),
    (["allreduce_ring", "--topology", str(NVIDIA_SMI / "dgx-a100-nics.txt"), "--gpu-model",
      "Z9000"], "unknown GPU model 'Z9000': no datasheet link speeds for it (known: P100, V100"),
    (["allreduce_ring", "--topology", "dgx-a100", "--gpu-model", "A100"],
     "--gpu-model reads saved `nvidia-smi topo -m` output"),
    (["nccl_ring", "--topology", str(NVIDIA_SMI / "dgx-a100-nics.txt"), "--gpu-model", "A100"],
     "nccl_ring builds its rings from a machine file or name"),
    (["allgather_ring", "--topology", "amd4"], "counts links but gives them no speed, so it "
     "cannot be timed: copy the file and give its link type a bandwidth"),
    (["allgather_ring", "--topology", "amd8", "--ranks", "4"], "amd8"),
    (["allgather_ring", "--topology", "dgx2", "--ranks", "4"],
     "the algorithm has 4 ranks but machine 'dgx2' has 16 GPUs: simulate it on a machine of "
     "4 GPUs, or build it for 16 ranks (library programs: --ranks 16)"),
    (["nccl", "--topology", str(ROCM_SMI)], "is `rocm-smi --showtopo` output, which msccl-py "
     "does not read: name the machine (e.g. --topology mi300x"),
    (["nccl", "--topology", str(ROCM_SMI), "--gpu-model", "MI300X"],
     "is `rocm-smi --showtopo` output: name the machine instead"),
])
def test_refusals_are_one_line(capsys, argv, message):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_file_target_takes_no_parameters(tmp_path, capsys):
    xml = tmp_path / "ring.xml"
    xml.write_text(library.compile_xml("allgather_ring", 8))
    code, _, err = _run(capsys, "allgather_ring", "--topology", "dgx-h100", "--compare",
                        f"{xml}:channels=2")
    assert code == 2 and "ring.xml is a file; parameters (channels=2) apply to library " \
                         "programs only" in err


def test_exact_times_every_rank_and_agrees(capsys, monkeypatch):
    argv = ("allreduce_ring", "--topology", "dgx-h100", "--nodes", "2", "--sizes",
            "1MiB,1GiB", "--json")
    code, fast, err = _run(capsys, *argv)
    assert code == 0 and "symmetry" not in err
    code, exact, _ = _run(capsys, *argv, "--exact")
    assert code == 0 and json.loads(fast) == json.loads(exact)
    # a large program that no symmetry shortens says why it is slow (here: 16 is large)
    import msccl_py.cli.simulate as cli_simulate
    monkeypatch.setattr(cli_simulate, "SLOW_RANKS", 16)
    code, _, err = _run(capsys, "allreduce_binomial_tree", "--topology", "dgx-h100",
                        "--nodes", "2", "--sizes", "1MiB")
    assert code == 0 and "no symmetry found among its 16 ranks" in err
    code, _, err = _run(capsys, *argv)
    assert code == 0 and "symmetry" not in err
    code, _, err = _run(capsys, "allreduce_binomial_tree", "--topology", "dgx-h100",
                        "--nodes", "2", "--sizes", "1MiB", "--exact")
    assert code == 0 and "symmetry" not in err
