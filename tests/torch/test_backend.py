"""The ``msccl`` torch.distributed backend, through ``torch.distributed``, in real processes.

Each test starts the ranks once (:mod:`ranks`, torchrun's variables) and every rank
runs many checks (:mod:`rank_checks`): each collective, dtype and op against the
exact result computed in float64 and cast; async calls (``Work.wait()``,
``get_future()`` with gloo's value structure); non-contiguous tensors; refusals
with msccl_py errors. The default run covers three dtypes at two sizes on 4 ranks
and two "hosts" (``MSCCL_PY_HOST``) for the debug lines; the full matrix on 3 and
4 ranks, and across hosts, is slow.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch.distributed")

from ranks import check_all_ok, launch, report  # noqa: E402

ALL_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8"]


def _two_hosts(r: int) -> dict:
    return {"MSCCL_PY_HOST": "host-a" if r < 2 else "host-b"}


def test_collectives_4_ranks():
    # bfloat16 at 4099 elements: PRODUCT reduced in bfloat16 ends 2 units in the last
    # place (over 1%) from the exact value; the backend reduces 16-bit floats in float32
    ranks = launch("rank_checks.py", 4, "--dtypes", "float32", "int8", "bfloat16",
                   "--sizes", "37", "4099")
    check_all_ok(ranks)
    # every kind of check ran on every rank (the root-only ones on their roots)
    counts = [int(re.search(r"rank \d+: (\d+) checks", r.stdout).group(1)) for r in ranks]
    assert min(counts) > 350, counts


@pytest.mark.slow   # about 40 s per launch on 2 cores
@pytest.mark.parametrize("n", [3, 4])
def test_collectives_every_dtype(n):
    check_all_ok(launch("rank_checks.py", n, "--dtypes", *ALL_DTYPES,
                        "--sizes", "0", "1", "37", "4099", timeout=600))


@pytest.mark.slow
def test_collectives_large():
    check_all_ok(launch("rank_checks.py", 3, "--dtypes", "float32", "float16", "uint8",
                        "--sizes", "300000", "--groups", "collectives", "async", timeout=600))


@pytest.mark.slow
def test_collectives_across_hosts():
    check_all_ok(launch("rank_checks.py", 4, "--dtypes", *ALL_DTYPES, "--sizes", "37", "4099",
                        rank_env=_two_hosts, timeout=600))


def _info(ranks) -> list[str]:
    return [line for r in ranks for line in r.stderr.splitlines() if " msccl_py INFO " in line]


def _program_lines(lines: list[str]) -> dict[str, str]:
    """``collective size-class`` -> the rest of its INFO line (each must appear once)."""
    got: dict[str, str] = {}
    for line in lines:
        m = re.search(r"INFO (\w+) (\S+) \(first call: \S+\): (.*)$", line)
        if m:
            key = f"{m.group(1)} {m.group(2)}"
            assert key not in got, f"{key} announced twice:\n" + "\n".join(lines)
            got[key] = m.group(3)
    return got


def test_debug_info_two_hosts():
    ranks = launch("debug_rank.py", 4, env={"MSCCL_PY_DEBUG": "INFO"}, rank_env=_two_hosts)
    for r in ranks:
        assert r.returncode == 0, report(ranks)
        assert "done 16 16 [0.0, 1.0, 2.0, 3.0]" in r.stdout, report(ranks)
    lines = _info(ranks)
    text = "\n".join(lines)
    assert re.search(r"^\S+:\d+:0 msccl_py INFO joined a torch.distributed launch of 4 ranks: "
                     r"2 hosts x 2 ranks \(host-a: ranks 0-1, host-b: ranks 2-3\); transports: "
                     r"shm within a host, gloo between hosts; simulate or tune this layout with "
                     r"--layout 2x2$", text, re.M), text
    assert re.search(r":0 msccl_py INFO host 'host-a': ranks \[0, 1\] share one arena; 2 ranks "
                     r"on other hosts are reached over gloo", text), text
    assert re.search(r":2 msccl_py INFO host 'host-b': ranks \[2, 3\] share one arena", text)
    progs = _program_lines(lines)
    # one line per collective and size class, however many calls: 4 all_reduce in 2 classes
    assert set(progs) == {"allreduce 1KiB-2KiB", "allreduce 1MiB-2MiB", "allgather 16B-32B",
                          "broadcast 1KiB-2KiB"}, text
    for rest in progs.values():
        assert re.match(r"\w+, \d+ channels?, protocol (LL|LL128|Simple), \d+ instances?; why: "
                        r"library: .+", rest), rest
    # across 2 hosts of 2 ranks the large all_reduce runs the hierarchical program
    assert progs["allreduce 1MiB-2MiB"].startswith("allreduce_hierarchical"), text
    assert "in nodes of 2" in progs["allreduce 1MiB-2MiB"]


@pytest.mark.slow
def test_debug_info_one_host():
    ranks = launch("debug_rank.py", 3, env={"MSCCL_PY_DEBUG": "INFO"})
    for r in ranks:
        assert r.returncode == 0 and "done 9 9 [0.0, 1.0, 2.0]" in r.stdout, report(ranks)
    text = "\n".join(_info(ranks))
    assert "joined a torch.distributed launch of 3 ranks: 1 host x 3 ranks" in text, text
    assert re.search(r"transports: shm within a host$", text, re.M), text
    assert "gloo between hosts" not in text
    assert len(_program_lines(_info(ranks))) == 4


@pytest.mark.slow
def test_debug_unset_prints_nothing():
    ranks = launch("debug_rank.py", 2, env={"MSCCL_PY_DEBUG": ""})
    for r in ranks:
        assert r.returncode == 0, report(ranks)
    assert _info(ranks) == []


@pytest.mark.slow
def test_algo_dir_serves_in_place_calls(tmp_path):
    # an in-place-only file must serve torch's all_reduce, which is in place at every
    # size (the backend's faster out-of-place route for small calls is off here)
    from msccl_py import library
    (tmp_path / "ring.xml").write_text(library.compile_xml("allreduce_ring", 4, use_cache=False))
    ranks = launch("debug_rank.py", 4, env={"MSCCL_PY_DEBUG": "INFO",
                                            "MSCCL_PY_ALGO_DIR": str(tmp_path)})
    for r in ranks:
        assert r.returncode == 0 and "done 16 16" in r.stdout, report(ranks)
    progs = _program_lines(_info(ranks))
    for size in ("1KiB-2KiB", "1MiB-2MiB"):
        assert progs[f"allreduce {size}"].startswith(f"{tmp_path / 'ring.xml'}, 1 channel"), \
            progs
        assert "MSCCL_PY_ALGO_DIR file ring.xml serves" in progs[f"allreduce {size}"]
    assert "no " + str(tmp_path) + " file serves it" in progs["broadcast 1KiB-2KiB"]



def test_all_to_all_rows():
    import torch

    from msccl_py.torch.exchange import rows_of as _rows
    assert _rows(None, 12) == (1, 12) and _rows(torch.zeros(()), 1) == (1, 1)
    assert _rows(torch.zeros(4, 3), 12) == (3, 4) and _rows(torch.zeros(0, 3), 0) == (1, 0)
    assert _rows(torch.zeros(4, 0), 0) == (0, 4)      # rows of no elements: splits count rows


def _semantics(n: int) -> None:
    ranks = launch("rank_semantics.py", n, timeout=600)
    check_all_ok(ranks)
    counts = [int(re.search(r"rank \d+: (\d+) checks", r.stdout).group(1)) for r in ranks]
    assert min(counts) > 190, counts


def test_semantics_2_ranks():
    # every dtype and op against a gloo group's result, coalesced calls, sparse, p2p,
    # resizable storages, group names, async order, DDP's buckets, a timeout
    _semantics(2)


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 4])
def test_semantics(n):
    _semantics(n)
