"""``msccl-py run`` with nccl-tests' habits: -b/-e/-f/-i sweeps, its table, plans timed alike."""

from __future__ import annotations

import re

import pytest

from msccl_py.cli import main
from msccl_py.cli.sweep import fit_sizes, sweep_sizes
from msccl_py.topologies import fully_connected
from msccl_py.targets.msccl import write_xml
from repo_paths import REPO

PLANS = REPO / "tests" / "data" / "mscclpp"
ROW = re.compile(r"^ +(\d+) +(\d+) +(\w+) +(\w+) +([\d.]+) +([\d.]+) +([\d.]+|n/a) +(\d+)$")


@pytest.fixture(scope="module")
def ring_xml(tmp_path_factory):
    from msccl_py import library
    path = tmp_path_factory.mktemp("run") / "ring.xml"
    path.write_text(write_xml(library.compile("allreduce_ring", 4)))
    return path


def _rows(out: str) -> list[tuple]:
    return [m.groups() for m in map(ROW.match, out.splitlines()) if m]


def test_sweep_sizes_as_nccl_tests_steps_them():
    assert sweep_sizes(8, 128 << 20, factor=2)[-1] == 128 << 20
    assert len(sweep_sizes(8, 128 << 20, factor=2)) == 25
    assert sweep_sizes(1024, 4096, step=1024) == [1024, 2048, 3072, 4096]
    assert sweep_sizes(100, 100) == [100]
    assert sweep_sizes(3, 10, factor=1.5) == [3, 4, 6, 9]      # never stuck below 1 byte more
    # sizes the algorithm cannot take are rounded down to ones it can, or left out
    assert fit_sizes([8, 16, 100, 128], step=16, lo=0, hi=1 << 40) == ([16, 96, 128], [8])


def test_sweep_prints_nccl_tests_table(ring_xml, capsys):
    assert main(["run", str(ring_xml), "-b", "8", "-e", "4K", "-f", "4", "-n", "1",
                 "-w", "0"]) == 0
    out, err = capsys.readouterr()
    header = [ln for ln in out.splitlines() if ln.startswith("#")]
    assert header[1].split() == ["#", "size", "count", "type", "redop", "time", "algbw",
                                 "busbw", "#wrong"]
    rows = _rows(out)
    # 8 B is below the ring's 16-byte step (4 chunks of float32): said, and left out
    assert [int(r[0]) for r in rows] == [32, 128, 512, 2048]
    assert "8 B left out" in err
    for size, count, dtype, redop, time_us, algbw, busbw, wrong in rows:
        assert int(count) == int(size) // 4 and dtype == "float" and redop == "sum"
        assert wrong == "0" and float(time_us) > 0
        # nccl-tests' allreduce busbw factor on 4 ranks: 2 * 3 / 4
        assert float(busbw) == pytest.approx(1.5 * float(algbw), abs=0.011)


def test_sweep_counts_wrong_elements_and_fails(tmp_path, capsys):
    from msccl_py import library
    alg = library.compile("allreduce_ring", 3)
    rcs = next(st for _, tb in alg.threadblocks() for st in tb.steps if st.op == "recv_copy_send")
    rcs.op = "recv_reduce_copy_send"     # reduces a chunk twice
    path = tmp_path / "bad.xml"
    path.write_text(write_xml(alg))
    assert main(["run", str(path), "-b", "12", "-e", "48", "-n", "1", "-w", "0",
                 "-d", "int32"]) == 1
    out = capsys.readouterr().out
    rows = _rows(out)
    assert len(rows) == 3 and all(r[2] == "int32" for r in rows)
    assert any(int(r[7]) > 0 for r in rows)       # wrong elements counted, the sweep goes on
    assert "WRONG in call 1: rank" in out


def test_sweep_options_are_checked(ring_xml, capsys):
    for args, message in ((["--bytes", "1MiB", "-b", "1K"], "give one or the other"),
                          (["-f", "2"], "give -b"),
                          (["-b", "8", "-e", "15"], "no size of the sweep (8 B) runs"),
                          (["-b", "4K", "-e", "1K"], "must go up"),
                          (["-b", "1K", "-e", "8K", "-f", "2", "-i", "1K"], "not both")):
        assert main(["run", str(ring_xml), *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err, (args, err)


def test_one_size_that_does_not_fit_names_near_ones(ring_xml, capsys):
    assert main(["run", str(ring_xml), "--bytes", "100"]) == 2
    assert ("multiples of 16 B (e.g. 96 B or 112 B)") in capsys.readouterr().err


def test_plan_run_line_has_the_xml_format_and_sweeps(capsys):
    plan = str(PLANS / "single_node" / "allreduce_pkt_4.json")
    assert main(["run", plan, "--bytes", "64KiB", "-n", "2", "-w", "1"]) == 0
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r"reference: allreduce allreduce_pkt_4 64 KiB float32 sum in-place: "
                        r"correct, median [\d.]+ ms over 2 calls after 1 warm-up, "
                        r"algbw [\d.]+ GB/s, busbw [\d.]+ GB/s", line), line
    assert main(["run", plan, "-b", "16K", "-e", "64K", "-n", "1", "-w", "0"]) == 0
    assert [int(r[0]) for r in _rows(capsys.readouterr().out)] == [16384, 32768, 65536]


def test_long_runs_show_progress_on_the_terminal(ring_xml, capsys, monkeypatch):
    from msccl_py import progress
    monkeypatch.setenv(progress.ENV, "1")      # as on a terminal, without waiting
    assert main(["run", str(ring_xml), "--bytes", "1KiB", "-n", "3", "-w", "1"]) == 0
    out, err = capsys.readouterr()
    assert "1 KiB float32 sum in-place: calls: 1/4 (0 s)" in err and "\r" in err
    assert "\r" not in out and out.count("\n") == 1     # the result line only
