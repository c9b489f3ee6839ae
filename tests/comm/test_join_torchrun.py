"""``msccl_py.init()`` under two ``torchrun --nnodes 2`` invocations with distinct hosts.

Each invocation stands for one node: ``--node_rank i``, 2 processes, its own
``MSCCL_PY_HOST``; they meet at ``--master_addr 127.0.0.1`` on a free port.
Connections between the two "nodes" go over gloo. Importing torch takes
about 10 s per process on two busy cores, hence slow.
"""

from __future__ import annotations

import pytest

from launching import env, free_port, results, torchrun, wait
from repo_paths import REPO

pytest.importorskip("torch")

WORKER = str(REPO / "tests" / "comm" / "launch_worker.py")
DTYPES = "float32,float64,float16,bfloat16,int8,uint8,int32,int64"
OPS = "sum,prod,max,min,avg"


def two_nodes(launches, port: int, args: list[str], timeout: float, **extra: str):
    """Start both torchrun invocations; their (exit status, stdout, stderr)."""
    procs = []
    for node in (0, 1):
        cmd = torchrun() + ["--nnodes", "2", "--node_rank", str(node), "--master_addr",
                            "127.0.0.1", "--master_port", str(port), "--nproc_per_node", "2",
                            WORKER] + args
        procs.append(launches.start(cmd, env(MSCCL_PY_HOST=f"node{node}", **extra)))
    outs = [wait(p, timeout) for p in procs]
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


@pytest.mark.slow
def test_every_collective_across_two_torchrun_nodes(launches):
    runs = two_nodes(launches, free_port(), ["all", f"37:{DTYPES}:{OPS};524288:float32:sum"],
                     400, MSCCL_PY_DEBUG="INFO")
    assert [rc for rc, _, _ in runs] == [0, 0], runs[0][2][-3000:] + runs[1][2][-3000:]
    rows = results(runs[0][1] + runs[1][1])
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    layout = "2 hosts x 2 ranks (node0: ranks 0-1, node1: ranks 2-3)"
    for r in rows:
        assert r["bad"] == [], r["bad"]
        assert r["layout"] == layout and r["transports"] == ["shm", "gloo"]
        assert r["engine"] == "gloo" and r["link_bytes"] > 0
    info = runs[0][2]
    assert (f"joined a torchrun launch of 4 ranks: {layout}; transports: shm within a host, "
            f"gloo between hosts; simulate or tune this layout with --layout 2x2") in info
    assert "host 'node1': ranks [2, 3] share one arena; 2 ranks on other hosts are reached " \
           "over gloo" in runs[1][2]
    assert "(first call: 2MiB): allreduce_hierarchical, " in info
    assert "in nodes of 2" in info


@pytest.mark.slow
def test_init_after_the_scripts_own_process_group(launches):
    """A script that called dist.init_process_group first: init meets through that group's
    store, and the script's group keeps working beside the communicator."""
    runs = two_nodes(launches, free_port(), ["all", "37:float32,bfloat16:sum,max"], 400,
                     WORKER_TORCH_PG="1")
    assert [rc for rc, _, _ in runs] == [0, 0], runs[0][2][-3000:] + runs[1][2][-3000:]
    rows = results(runs[0][1] + runs[1][1])
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["bad"] == [] and r["engine"] == "gloo"
        assert r["torch_group"] == [6.0] * 4
