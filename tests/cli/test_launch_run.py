"""``msccl-py run`` under mpirun: the seed program as 2 hosts x 8 ranks.

``msccl-py run programs/alltonext_backward.py 2 1`` started by ``mpirun -np
16`` (``MSCCL_PY_HOST`` = rank // 8) runs as 16 ranks of that launch: each
checks its own output, rank 0 alone prints the verdict, the run line and
what crossed hosts. The program moves rank 8's whole input (node 1's first
GPU) to rank 7 (node 0's last), spread over node 1's 8 GPUs: per call, 8
FIFO transfers and one input's bytes cross the engine, nothing else.
"""

from __future__ import annotations

import re
import sys

import pytest

from launching import env, have_mpirun, launches, mpirun  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(not have_mpirun(), reason="needs mpirun and mpi4py")


@pytest.mark.slow
def test_seed_program_runs_as_two_hosts_of_eight(launches):
    warmup, iters, size = 1, 3, 1 << 20
    wrapped = (f"MSCCL_PY_HOST=node$((OMPI_COMM_WORLD_RANK / 8)) exec {sys.executable} -m "
               f"msccl_py run --bytes {size} -w {warmup} -n {iters} "
               f"programs/alltonext_backward.py 2 1")
    rc, out, err, secs = launches.run(mpirun(16) + ["sh", "-c", wrapped], env(), 400)
    assert rc == 0, out[-2000:] + err[-4000:]
    lines = out.splitlines()
    runs = [line for line in lines if line.startswith("launch: ")]
    assert len(runs) == 1, out                       # rank 0 only
    assert re.match(r"launch: custom alltonext-backwards 1 MiB float32 out-of-place: correct, "
                    rf"median [\d.]+ ms over {iters} calls after {warmup} warm-up", runs[0])
    assert sum("compiled and verified" in line for line in lines) == 1
    assert err.count("writing that dialect") == 1   # the compiler's note, once
    calls = warmup + iters
    crossed = [line for line in lines if line.startswith("between hosts")]
    assert crossed == [f"between hosts (2 hosts x 8 ranks (node0: ranks 0-7, node1: ranks "
                       f"8-15)): {8 * calls} FIFO transfers, {size * calls} bytes over mpi"]
    print(f"mpirun -np 16 (2 hosts x 8 ranks), seed program: {secs:.1f} s")


@pytest.mark.slow
def test_a_wrong_rank_count_is_refused(launches):
    """The seed program for 2 nodes needs 16 ranks; 4 ranks get a clear error on every rank."""
    cmd = mpirun(4) + [sys.executable, "-m", "msccl_py", "run", "programs/alltonext_backward.py",
                       "2", "1"]
    rc, out, err, _ = launches.run(cmd, env(), 300)
    assert rc != 0
    assert "alltonext-backwards has 16 ranks but the launch has 4: start 16 processes" in err


@pytest.mark.slow
def test_run_under_two_torchrun_nodes(launches):
    """``msccl-py run`` as 4 ranks of two torchrun invocations (hosts node0, node1)."""
    pytest.importorskip("torch")
    from launching import free_port, torchrun, wait
    port = free_port()
    procs = [launches.start(torchrun() + ["--nnodes", "2", "--node_rank", str(node),
                                          "--master_addr", "127.0.0.1", "--master_port",
                                          str(port), "--nproc_per_node", "2", "--no-python",
                                          sys.executable, "-m", "msccl_py", "run", "-w", "1",
                                          "-n", "2", "programs/allreduce_hierarchical.py", "4",
                                          "2"],
                            env(MSCCL_PY_HOST=f"node{node}")) for node in (0, 1)]
    (out0, err0), (out1, err1) = [wait(p, 400) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], err0[-3000:] + err1[-3000:]
    assert re.search(r"^launch: allreduce allreduce_hierarchical 1 MiB float32 sum in-place: "
                     r"correct, median", out0, re.M)
    assert re.search(r"^between hosts \(2 hosts x 2 ranks \(node0: ranks 0-1, node1: ranks "
                     r"2-3\)\): \d+ FIFO transfers, \d+ bytes over gloo$", out0, re.M)
    assert "launch:" not in out1          # node1 holds ranks 2-3: they print nothing
