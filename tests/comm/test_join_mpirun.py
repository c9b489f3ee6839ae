"""``msccl_py.init()`` under mpirun, as 2 hosts x 2 ranks on one machine (``MSCCL_PY_HOST``).

Each rank's host comes from its MPI rank (``h$((OMPI_COMM_WORLD_RANK / 2))``)
through a shell wrapper, as a site would set it per node. The worker
(``launch_worker.py``) checks every collective itself; the test reads its
``RESULT`` lines and rank 0's ``MSCCL_PY_DEBUG=INFO`` lines.
"""

from __future__ import annotations

import re
import sys

import pytest

from launching import env, have_mpirun, mpirun, results
from repo_paths import REPO

pytestmark = pytest.mark.skipif(not have_mpirun(), reason="needs mpirun and mpi4py")

WORKER = str(REPO / "tests" / "comm" / "launch_worker.py")
LAYOUT = "2 hosts x 2 ranks (h0: ranks 0-1, h1: ranks 2-3)"
DTYPES = "float32,float64,float16,bfloat16,int8,uint8,int32,int64"
OPS = "sum,prod,max,min,avg"


def _launch(launches, groups: str, per_host: int = 2, np_: int = 4, timeout: float = 300):
    wrapped = (f"MSCCL_PY_HOST=h$((OMPI_COMM_WORLD_RANK / {per_host})) "
               f"exec {sys.executable} {WORKER} all '{groups}'")
    return launches.run(mpirun(np_) + ["sh", "-c", wrapped], env(MSCCL_PY_DEBUG="INFO"),
                        timeout)


def _info(stderr: str) -> list[str]:
    return [line.split(" msccl_py INFO ", 1)[1] for line in stderr.splitlines()
            if " msccl_py INFO " in line]


def test_two_hosts_join_and_say_so(launches):
    """One dtype: the layout, both transports and a program line, and correct results."""
    rc, out, err, _ = _launch(launches, "37:float32:sum")
    assert rc == 0, err[-4000:]
    rows = results(out)
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["bad"] == [] and r["cases"] > 0
        assert r["layout"] == LAYOUT and r["transports"] == ["shm", "mpi"]
        assert r["engine"] == "mpi" and r["link_bytes"] > 0
    info = _info(err)
    assert f"joined a openmpi launch of 4 ranks: {LAYOUT}; transports: shm within a host, " \
           f"mpi between hosts; simulate or tune this layout with --layout 2x2" in info
    assert "host 'h0': ranks [0, 1] share one arena; 2 ranks on other hosts are reached " \
           "over mpi" in info
    assert "host 'h1': ranks [2, 3] share one arena; 2 ranks on other hosts are reached " \
           "over mpi" in info
    # the program line: name, channels, protocol, instances and why, once per collective
    assert "allreduce 128B-256B (first call: 148B): allreduce_oneshot, 1 channel, protocol LL, " \
           "1 instance; why: library: first of the allreduce preferences that takes 4 ranks " \
           "and declares 148 bytes" in info, info
    assert sum(line.startswith("allreduce ") for line in info) == 1   # first call only


@pytest.mark.slow
def test_every_collective_dtype_and_op_across_two_hosts(launches):
    """Every collective x dtype x op at a size no program divides, then float32 at 2 MiB per
    rank, where the hierarchical programs take over."""
    rc, out, err, secs = _launch(launches, f"37:{DTYPES}:{OPS};524288:float32:sum,avg")
    assert rc == 0, err[-4000:]
    rows = results(out)
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["bad"] == [], r["bad"]
        assert r["layout"] == LAYOUT and r["engine"] == "mpi"
    # 9 collectives; the reductions (all_reduce twice: out of place and in place) per op
    per_dtype = lambda ops: 4 * ops + 5    # noqa: E731
    assert rows[0]["cases"] == 8 * per_dtype(5) + 1 + per_dtype(2) + 1
    info = "\n".join(_info(err))
    for name in ("allreduce_hierarchical", "allgather_hierarchical", "alltoall_two_step"):
        assert re.search(rf"\(first call: 2MiB\): {name}, .*in nodes of 2", info), info
    print(f"2 hosts x 2 ranks under mpirun, {rows[0]['cases']} cases: {secs:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("np_, host, layout, shape, hierarchical", [
    (6, "h$((OMPI_COMM_WORLD_RANK / 2))",
     "3 hosts x 2 ranks (h0: ranks 0-1, h1: ranks 2-3, h2: ranks 4-5)", "3x2", True),
    (4, "h$((OMPI_COMM_WORLD_RANK % 2))", "2 hosts x 2 ranks (h0: ranks 0,2, h1: ranks 1,3)",
     None, False),
    (4, "h$((OMPI_COMM_WORLD_RANK / 3))", "2 hosts of 3, 1 ranks (h0: ranks 0-2, h1: rank 3)",
     None, False),
    (3, "h$OMPI_COMM_WORLD_RANK", "3 hosts x 1 rank (h0: rank 0, h1: rank 1, h2: rank 2)",
     "3x1", False),
], ids=["3x2", "round-robin", "3+1", "3x1"])
def test_other_layouts(launches, np_, host, layout, shape, hierarchical):
    """Three hosts, hosts whose ranks interleave, hosts of unequal size, one rank per host:
    correct everywhere; hierarchical programs only where hosts hold equal consecutive
    ranges of at least 2."""
    wrapped = (f"MSCCL_PY_HOST={host} exec {sys.executable} {WORKER} all "
               f"'37:float32,int8,bfloat16:sum,max;300000:float32:sum'")
    rc, out, err, _ = launches.run(mpirun(np_) + ["sh", "-c", wrapped],
                                   env(MSCCL_PY_DEBUG="INFO"), 300)
    assert rc == 0, err[-4000:]
    rows = results(out)
    assert [r["rank"] for r in rows] == list(range(np_))
    assert all(r["bad"] == [] and r["layout"] == layout for r in rows)
    info = "\n".join(_info(err))
    assert ("allreduce_hierarchical" in info) == hierarchical
    said = re.search(r"simulate or tune this layout with --layout (\S+)", info)
    assert (said.group(1) if said else None) == shape
