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
