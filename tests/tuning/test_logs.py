"""Reading nccl-tests / rccl-tests logs as published and as people paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from msccl_py.errors import LogError
from msccl_py.tuning.logs import parse_text, read_log

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"


def test_rccl_tests_mi300x_log():
    log = read_log(DATA / "mi300x_all_reduce_rccl.txt")
    assert (log.collective, log.nranks) == ("allreduce", 8)  # from the command line and Rank lines
    assert len(log.rows) == 31 and log.rows[0].size == 8
    last = log.rows[-1]
    assert (last.size, last.time_us, last.busbw, last.in_place_us) == (8589934592, 47617.0,
                                                                        315.69, 47584.0)


def test_the_library_and_element_counts_come_from_the_log():
    rccl = read_log(DATA / "mi300x_all_reduce_rccl.txt")
    assert rccl.library == "RCCL" and rccl.rows[0].count == 2
    assert read_log(DATA / "a100_all_reduce_gcm.txt").library == "NCCL"
    bare = parse_text("1048576 262144 float sum -1 21.0 49.93 87.38 0 20.9 50.17 87.80 0")
    assert bare.library is None and bare.rows[0].count == 262144


def test_old_column_layout_without_root():
    log = read_log(DATA / "v100_dgx1_all_reduce_old_layout.txt")
    assert log.nranks == 8 and log.collective == "allreduce"
    assert len(log.rows) == 25
    assert (log.rows[-1].time_us, log.rows[-1].busbw) == (1818.8, 129.14)


def test_launcher_prefixes_and_collapsed_spacing():
    text = (DATA / "a100_all_reduce_gcm.txt").read_text()
    collapsed = "\n".join(f"{i % 8}: " + re.sub(r"[ \t]+", " ", line).strip()
                          for i, line in enumerate(text.splitlines()))
    log = parse_text(collapsed, "pasted")
    want = read_log(DATA / "a100_all_reduce_gcm.txt")
    assert log.rows == want.rows
    assert log.nranks == 8
    tagged = "\n".join("[1,0]<stdout>:" + line for line in text.splitlines())
    assert [r.busbw for r in parse_text(tagged).rows] == [r.busbw for r in want.rows]


def test_interleaved_rank_tags_inside_rows():
    text = ("[0]   1048576   262144   float   sum   -1[0]   1626.5   0.64   1.24   0[0]"
            "   2302.3   0.46   0.87   0\n")
    row = parse_text(text).rows[0]
    assert (row.size, row.time_us, row.busbw, row.in_place_us) == (1048576, 1626.5, 1.24, 2302.3)


def test_rccl_tests_csv():
    text = ("collective, gpus, size, type, redop, inplace, time, algbw, busbw, #wrong\n"
            "AllReduce, 8, 1048576, float, sum, 0, 28.39, 36.94, 64.64, 0\n"
            "AllReduce, 8, 1048576, float, sum, 1, 28.04, 37.40, 65.45, 0\n"
            "AllReduce, 8, 2097152, float, sum, 0, 36.68, 57.17, 100.05, N/A\n")
    log = parse_text(text, "run.csv")
    assert (log.collective, log.nranks) == ("allreduce", 8)
    assert [(r.size, r.time_us, r.in_place_us) for r in log.rows] == [(1048576, 28.39, 28.04),
                                                                      (2097152, 36.68, None)]


def test_environment_echo_names_algo_and_proto():
    text = ("node:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
            "NCCL_PROTO=LL128 ./build/all_gather_perf -b 8 -e 1G -f 2 -g 4\n"
            "     1048576        65536     float    none      -1    102.4   10.24    7.68      0"
            "    102.4   10.24    7.68      0\n")
    log = parse_text(text)
    assert (log.algo, log.proto, log.collective) == ("Ring", "LL128", "allgather")
    assert log.nranks == 4  # from busbw / algbw = (n-1)/n


def test_no_rows_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("# nThread 1 nGpus 8\n# Out of bounds values : 0 OK\n")
    with pytest.raises(LogError, match=r"empty.log: no nccl-tests result rows"):
        read_log(path)


def test_a_truncated_row_names_its_line():
    with pytest.raises(LogError, match=r"paste:2: a result row needs time, algbw and busbw"):
        parse_text("# size count type\n 1024 256 float sum -1 12.5\n", "paste")


def test_a_file_name_that_names_the_collective_also_gives_the_ranks(tmp_path):
    # no banner, no Rank lines: an allgather's busbw/algbw (15/16) says 16 ranks only once
    # the file name has said allgather (the factor alone reads as nothing below 1)
    row = "  8589934592     134217728     float    none      -1    42713  201.11  188.54    N/A\n"
    assert parse_text(row).nranks is None
    (tmp_path / "run_all_gather.txt").write_text(row)
    log = read_log(tmp_path / "run_all_gather.txt")
    assert (log.collective, log.nranks) == ("allgather", 16)
    published = read_log(DATA / "a3mega_h100_2node_all_gather_tcpxo.txt")
    assert (published.collective, published.nranks, len(published.rows)) == ("allgather", 16, 11)


def test_header_says_gpus_per_process():
    assert parse_text("# nThread 1 nGpus 8 minBytes 8 maxBytes 64\n"
                      "       8   2  float  sum  -1  30.0  0.00  0.00  0  30.0  0.00  0.00  0\n"
                      ).gpus_per_process == 8
    assert parse_text("# nGpus(perProc) 1 minBytes 1 maxBytes 8\n"
                      "       8   2  float  sum  -1  30.0  0.00  0.00  0  30.0  0.00  0.00  0\n"
                      ).gpus_per_process == 1
    assert parse_text("       8   2  float  sum  -1  30.0  0.00  0.00  0  30.0  0.00  0.00  0\n"
                      ).gpus_per_process is None
    assert read_log(DATA / "oci_bm_gpu4_a100_1node_g8_all_reduce.txt").gpus_per_process == 8


def test_manifest_names_every_published_log_with_its_machine():
    from msccl_py.topologies import load
    entries = {}
    for line in (DATA / "manifest.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, topology, nodes, note = line.split("\t")
            entries[name] = (topology, int(nodes))
            if note.startswith("misconfigured:"):
                # a marked run says why, and the README gives its source for that
                assert len(note) > 40 and "misconfigured" in (DATA / "README.md").read_text()
    assert set(entries) == {p.name for p in DATA.glob("*.txt")}
    for name, (topology, nodes) in entries.items():
        log = read_log(DATA / name)
        assert log.nranks == nodes * load(topology).num_nodes(), name
        assert name in (DATA / "README.md").read_text()


def test_time_ranges_say_where_the_log_contradicts_itself():
    from msccl_py.tuning.logs import Log, Row
    rows = [Row(1 << 20, 30.0, 0, 0, 30.5), Row(2 << 20, 55.0, 0, 0, 40.0),
            Row(4 << 20, 90.0, 0, 0, 90.2), Row(8 << 20, 100.0, 0, 0, 100.0)]
    spans = Log("x", rows=rows).time_ranges(["ring"] * 4)
    # in place and out of place within 10%: one time
    assert spans[0] == (30.0, 30.0) and spans[3] == (100.0, 100.0)
    # 55 out of place, 40 in place: either
    assert spans[1] == (40.0, 55.0)
    # 4 MiB took 90 us where 8 MiB took 100: the extra 4 MiB at the log's best bandwidth
    # (8 MiB in 100 us) takes 50 us, so 4 MiB could have taken 50
    assert spans[2] == (pytest.approx(50.0), 90.0)
    # unless the two ran differently (NCCL may switch to a faster protocol there)
    assert Log("x", rows=rows).time_ranges(["ring"] * 3 + ["tree"])[2] == (90.0, 90.0)
