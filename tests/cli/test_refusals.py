"""A new user's inputs the CLI refuses or annotates: one line `error: ...` and exit 2 (or a
note), never a traceback."""

from __future__ import annotations

import pytest

from msccl_py.cli import main

NO_TB = "machine m {\n gpus 2\n linktype nv 100 GB/s\n link 0 <-> 1 nv\n}\n"


def _one_error(capsys, argv: list[str], starts: str) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(f"error: {starts}"), err
    return err


def test_simulate_notes_a_machine_without_threadblock_figure(tmp_path, capsys):
    path = tmp_path / "m.topo"
    path.write_text(NO_TB)
    assert main(["simulate", "allreduce_ring", "--topology", str(path), "--sizes", "1MiB"]) == 0
    out, err = capsys.readouterr()
    assert "1 MiB" in out
    assert err == ("note: m gives no threadblock figure, so this prediction has no "
                   "per-threadblock limit (add 'threadblock BW' to its machine file: "
                   "docs/performance-model.md)\n")
    path.write_text(NO_TB.replace("}", " threadblock 20 GB/s\n}"))
    assert main(["simulate", "allreduce_ring", "--topology", str(path), "--sizes", "1MiB"]) == 0
    assert capsys.readouterr().err == ""


def test_missing_nvidia_smi_file_is_said_so(tmp_path, capsys):
    missing = tmp_path / "smi.txt"
    _one_error(capsys, ["simulate", "allreduce_ring", "--topology", str(missing),
                        "--gpu-model", "H100"],
               f"--gpu-model reads saved `nvidia-smi topo -m` output, and {missing} does not "
               f"exist")
    missing.write_text("hello\n")
    _one_error(capsys, ["simulate", "allreduce_ring", "--topology", str(missing),
                        "--gpu-model", "H100"],
               f"--gpu-model reads saved `nvidia-smi topo -m` output, and {missing} is not "
               f"`nvidia-smi topo -m` output")


def test_run_of_a_deadlocking_xml_says_so_before_starting_ranks(capsys):
    from repo_paths import REPO
    xml = str(REPO / "tests" / "data" / "verify" / "ring_allgather_3_depcycle.xml")
    for sizes in (["--bytes", "96KiB"], ["-b", "96KiB", "-e", "384KiB"]):
        assert main(["run", xml, "--backend", "shm", *sizes]) == 1
        out, err = capsys.readouterr()
        assert len(out.splitlines()) == 1, out
        assert out.startswith("shm: allgather allgather_dependency_cycle 96 KiB float32 "
                              "out-of-place: DEADLOCK (the verifier's model, found before "
                              "starting ranks): 4 threadblocks stuck: rank 0 tb 0 step 0 "
                              "(send, iteration 0) waits for rank 0 tb 1"), out


def test_every_environment_variable_is_in_help_and_docs(capsys):
    import re

    from repo_paths import REPO
    from msccl_py.cli import ENVIRONMENT
    used = set()
    for path in (REPO / "msccl_py").rglob("*.py"):
        used.update(re.findall(r"MSCCL_PY_[A-Z_]+", path.read_text()))
    assert used <= set(ENVIRONMENT), used - set(ENVIRONMENT)
    docs = (REPO / "docs" / "cli.md").read_text().split("## Environment variables", 1)[1]
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        for name in ENVIRONMENT:
            assert f"  {name} " in out, (argv, name)
            assert f"| `{name}` |" in docs, name


@pytest.mark.parametrize("argv, says", [
    (["simulate", "allreduce_ring", "--topology", "dgx-h100", "--ranks", "0", "--sizes", "1MiB"],
     "program allreduce_ring needs at least 2 ranks, got 0"),
    (["simulate", "nccl_ring", "--topology", "dgx-h100", "--ranks", "0", "--sizes", "1MiB"],
     "program nccl_ring needs at least 2 ranks, got 0"),
    (["compile", "allreduce_ring", "--ranks", "0"],
     "program allreduce_ring needs at least 2 ranks, got 0"),
    (["topology", "bound", "dgx-h100", "--collective", "allreduce", "--nodes", "0"],
     "--nodes must be at least 1, not 0"),
    (["simulate", "allreduce_ring", "--topology", "dgx-h100", "--instances", "0"],
     "allreduce_ring: instances must be at least 1, got 0"),
])
def test_rank_and_node_counts_below_what_a_program_takes_are_refused(argv, says, capsys):
    _one_error(capsys, argv, says)


def test_tune_with_zero_ranks_is_refused_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r0dir"
    _one_error(capsys, ["tune", "--collective", "allreduce", "--topology", "dgx-h100",
                        "--ranks", "0", "-o", str(out)],
               "topology 'dgx-h100' has 8 ranks, not 0")
    assert not out.exists() or not any(out.iterdir())


def test_compile_announces_a_large_xml_before_it_starts(capsys, monkeypatch):
    from msccl_py.cli import compile as cli_compile
    est = cli_compile.estimate_xml_bytes("allreduce_ring", 64, None, {"instances": 1})
    assert main(["compile", "allreduce_ring", "--ranks", "64"]) == 0
    actual = len(capsys.readouterr().out)
    assert 0.8 * actual < est < 1.25 * actual           # a ring grows as n^2
    cli_compile._announce_size("allreduce_ring", 1000, None, {"instances": 1})
    err = capsys.readouterr().err
    assert err.startswith("warning: allreduce_ring on 1000 ranks will write about ")
    assert int(err.split("about ")[1].split(" MB")[0]) > 200    # 241 MB when written
    cli_compile._announce_size("allreduce_ring", 32, None, {"instances": 1})
    assert capsys.readouterr().err == ""                         # under 64 MB: silent


def test_missing_topology_file_in_a_program_names_the_program_line(tmp_path, capsys):
    prog = tmp_path / "prog.py"
    prog.write_text("from msccl_py.language import *\n"
                    "from msccl_py.language.collectives import AllReduce\n"
                    "from msccl_py.topologies import load\n"
                    "\n"
                    "topo = load('my_machine.topo')\n"
                    "with MSCCLProgram('x', topo, AllReduce(2, 2, True), 1):\n"
                    "    XML()\n")
    _one_error(capsys, ["compile", str(prog)], f"{prog}:5: no such topology file: "
                                                f"my_machine.topo")


def test_top_level_help_lists_topology_bound(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    topology = out[out.index("    topology "):out.index("    calibrate")]
    assert "list, show" in topology and "bound" in topology


@pytest.mark.parametrize("argv", [["tune", "--help"], ["--help"]])
def test_help_prints_percent_signs_once(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    out = " ".join(capsys.readouterr().out.split())
    assert "within 2% merged" in out and "%%" not in out
