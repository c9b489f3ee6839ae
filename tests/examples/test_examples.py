"""Every script in examples/ runs and prints what its docstring promises.

Each example runs in a subprocess, as a user would run it, from a scratch
working directory (so no example depends on the caller's cwd).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SHARED = REPO.parent / "shared"
CORPUS_FILE = SHARED / "corpus" / "xml" / "ns3-msccl-data__ar_allpair_simple_x_1.xml"


def run_example(script: Path, *args: str, cwd: Path, timeout: float = 60) -> str:
    """stdout of ``python script args``; fails the test on a nonzero exit."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (f"{script.name} exited {done.returncode}\n"
                                  f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done.stdout


def test_every_example_is_tested():
    tested = {"custom_collective", "ring_allreduce_walkthrough", "verify_foreign_xml",
              "communicator_cpu", "gpu_allreduce", "my_machine", "export_for_nccl", "seed_mpi",
              "ddp_train"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_custom_collective(tmp_path):
    out = run_example(EXAMPLES / "custom_collective.py", cwd=tmp_path)
    # the deliberate mistake names the example's own source line
    m = re.search(r"LinkError: (\S+custom_collective\.py):(\d+): no link from rank 2 to rank 0",
                  out)
    assert m, out
    line = (EXAMPLES / "custom_collective.py").read_text().splitlines()[int(m.group(2)) - 1]
    assert ".reduce(" in line
    assert "Check() -> False" in out and "Check() -> True" in out
    assert "Check: rank 0 output[0]: expected ReduceChunk[(0, 0), (3, 0)]" in out
    assert "verify: incorrect: rank 0 output chunk 0" in out
    assert "verify: ok: custom postcondition holds" in out
    # rank r holds 10**r, so the neighbour sums are exact
    for r, value in enumerate(("1001", "11", "110", "1100")):
        assert f"rank {r}: {value} (expected {value}) ok" in out
    assert "WRONG" not in out


def test_ring_allreduce_walkthrough(tmp_path):
    out = run_example(EXAMPLES / "ring_allreduce_walkthrough.py", cwd=tmp_path)
    sections = out.split("== ")[1:]
    assert len(sections) == 3
    auto, manual, inst = sections
    assert "1 channels, 4 chunks per loop" in auto and "total: 4 threadblocks" in auto
    assert "2 channels, 4 chunks per loop" in manual and "total: 8 threadblocks" in manual
    assert "2 channels, 8 chunks per loop" in inst and "total: 8 threadblocks, 56 steps" in inst
    # manual placement: rank 0 has one threadblock per channel
    rows = re.findall(r"^\s+(\d+)\s+(-?\d+)\s+(-?\d+)\s+(\d+)\s+(send|recv)", manual, re.M)
    assert [(tb, ch) for tb, _, _, ch, _ in rows] == [("0", "0"), ("1", "1")]
    for section in sections:
        assert "verify: ok: allreduce postcondition holds (in-place)" in section
        assert "recv_reduce_send" in section   # fusion happened in every version


@pytest.mark.skipif(not CORPUS_FILE.is_file(), reason="../shared corpus is not present")
def test_verify_foreign_xml_corpus(tmp_path):
    out = run_example(EXAMPLES / "verify_foreign_xml.py", cwd=tmp_path)
    assert "file: ns3-msccl-data__ar_allpair_simple_x_1.xml" in out
    small, large = out.split("--- 64 KiB per rank")[1].split("--- 64 MiB per rank")
    assert small.strip().startswith("ok: allreduce postcondition holds")
    assert large.strip().startswith("deadlock: deadlocks with large messages")
    assert "waits for room in the FIFO" in large
    assert 'safe: up to 16 MiB per rank (safe_max_bytes); writing maxBytes="16777216"' in out
    assert "with maxBytes=16777216: ok:" in out


def test_verify_foreign_xml_without_shared(tmp_path, monkeypatch):
    # a copy of the example in a tree with no ../shared writes its own XML, in a
    # temporary folder it names and removes
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    shutil.copy(EXAMPLES / "verify_foreign_xml.py", repo / "examples")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    out = run_example(repo / "examples" / "verify_foreign_xml.py", cwd=tmp_path)
    assert f"(no ../shared corpus here; wrote {tmp}/msccl_py-example-" in out
    assert "eager_allpairs.xml to verify instead; it is removed once read)" in out
    assert list(tmp.iterdir()) == []
    small, large = out.split("--- 64 KiB per rank")[1].split("--- 64 MiB per rank")
    assert small.strip().startswith("ok:")
    assert large.strip().startswith("deadlock:")
    assert "with maxBytes=8388608: ok:" in out


def test_verify_foreign_xml_given_file(tmp_path):
    from msccl_py import library
    path = tmp_path / "ring.xml"
    path.write_text(library.compile_xml("allgather_ring", 4, use_cache=False))
    out = run_example(EXAMPLES / "verify_foreign_xml.py", str(path), cwd=tmp_path)
    assert "file: ring.xml" in out
    assert "all sizes in the XML's range: ok: allgather postcondition holds" in out


def test_verify_foreign_xml_broken_file(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text('<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2"\n')
    done = subprocess.run([sys.executable, str(EXAMPLES / "verify_foreign_xml.py"), str(path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr


def test_communicator_cpu(tmp_path):
    out = run_example(EXAMPLES / "communicator_cpu.py", "3", cwd=tmp_path, timeout=120)
    for r in range(3):
        block = out.split(f"rank {r}:")[1].split("rank ")[0]
        assert "all_reduce [6.0, 6.0, 6.0, 6.0]" in block
        assert "all_gather [0, 1, 10, 11, 20, 21]" in block
        assert f"all_to_all [{r}, {100 + r}, {200 + r}]" in block
        assert "broadcast  [7.0, 8.0, 9.0]" in block
        # each call names the library program that ran it
        assert re.search(r"all_reduce .*\[allreduce_\w+\]", block)
    assert "all_reduce gives 6 on every rank: True" in out


def test_gpu_allreduce(tmp_path):
    from msccl_py.runtime import cupy as gpu
    reason = gpu.available()
    out = run_example(EXAMPLES / "gpu_allreduce.py", cwd=tmp_path, timeout=300)
    if reason is not None:
        assert out.startswith(f"no GPU run: {reason}")
    else:
        assert out.count(": True") == 4 and "False" not in out


def test_my_machine_sample(tmp_path):
    sample = EXAMPLES / "data" / "dgx1-v100-nvidia-smi.txt"
    out = run_example(EXAMPLES / "my_machine.py", str(sample), cwd=tmp_path)
    assert "8 GPUs" in out
    assert re.search(r"LinkError: \S+my_machine\.py:\d+: no link from rank 3 to rank 4", out)
    m = re.search(r"ring over NVLinks only \[([\d, ]+)\]", out)
    order = [int(x) for x in m.group(1).split(",")]
    assert sorted(order) == list(range(8))
    from msccl_py.topologies import read_nvidia_smi
    topo = read_nvidia_smi(sample.read_text(), include_pcie=False)
    assert all(topo.link(order[i], order[(i + 1) % 8]) for i in range(8))
    assert "Check() -> True" in out and "verify: ok:" in out


def test_my_machine_default_source(tmp_path):
    out = run_example(EXAMPLES / "my_machine.py", cwd=tmp_path)
    assert out.startswith("machine: ")
    assert "verify: ok:" in out or "no ring over NVLinks" in out


def test_export_for_nccl(tmp_path):
    dest = tmp_path / "algos"
    out = run_example(EXAMPLES / "export_for_nccl.py", str(dest), cwd=tmp_path)
    from msccl_py.targets.msccl import read_xml
    for target in ("msccl", "msccl-executor", "rccl"):
        files = sorted((dest / target).glob("*.xml"))
        assert len(files) == 2, files
        algs = [read_xml(f) for f in files]
        # disjoint, covering ranges: [0, 1 MiB] then (1 MiB, unbounded)
        ranges = sorted((a.min_bytes, a.max_bytes) for a in algs)
        assert ranges == [(0, 1 << 20), ((1 << 20) + 1, 0)]
        env = (dest / target / "msccl.env").read_text()
        if target == "msccl":
            assert "export MSCCL_XML_FILES=" in env and "NCCL_ALGO=MSCCL,RING,TREE" in env
            listed = env.split("MSCCL_XML_FILES=")[1].split()[0].strip("'").split(":")
            assert sorted(listed) == sorted(str(f) for f in files)
        else:
            assert f"export MSCCL_ALGO_DIR={dest / target}" in env
    text = (dest / "msccl-executor" / "allreduce_allpairs.LL.xml").read_text()
    assert 'minBytes="0" maxBytes="1048576"' in text.splitlines()[0]
    if CORPUS_FILE.is_file():
        assert "deadlocks with large messages; maxBytes set to 16777216" in out
        assert "not exported: that range overlaps" in out


def _seed_scenarios(n: int) -> dict:
    """Each rank's result of the seed's eight test scenarios at world size n (plain Python)."""
    four = [[r * 10 + i for i in range(4)] for r in range(n)]
    two = [[r * 10 + i for i in range(2 * n)] for r in range(n)]
    total = [sum(col) for col in zip(*two)]
    flat4 = [x for row in four for x in row]
    return {
        "gather": [flat4] + [None] * (n - 1),
        "scatter": [[10 * r] for r in range(n)],
        "broadcast": [[10 * i for i in range(n)]] * n,
        "all_to_all": [[x for q in range(n) for x in two[q][2 * r:2 * r + 2]] for r in range(n)],
        "all_gather": [flat4] * n,
        "reduce_scatter": [total[2 * r:2 * r + 2] for r in range(n)],
        "all_reduce": [[t / n for t in total]] * n,
        "reduce": [total] + [None] * (n - 1),
    }


def _check_seed_mpi(out: str, n: int) -> None:
    sections = out.split("== ")[1:]
    want = _seed_scenarios(n)
    assert len(sections) == len(want), out
    for section, (name, per_rank) in zip(sections, want.items()):
        assert section.split(",")[0].endswith(name), section
        got = dict(re.findall(r"Rank (\d+) data: (\[[^\]]*\]|None)", section))
        assert got == {str(r): str(v) for r, v in enumerate(per_rank)}, section


@pytest.mark.skipif(not (SHARED / "seeds" / "nccl_in_500_locs_mpi.txt").is_file(),
                    reason="../shared seeds are not present")
def test_seed_mpi_runs_the_seeds_own_tests(tmp_path):
    out = run_example(EXAMPLES / "seed_mpi.py", "3", cwd=tmp_path, timeout=300)
    assert "== seed's test_gather, 3 ranks on msccl_py.mpi" in out
    _check_seed_mpi(out, 3)


@pytest.mark.slow  # the same scenarios as the seed's own tests, which the default run covers
def test_seed_mpi_without_shared(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCCL_PY_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    shutil.copy(EXAMPLES / "seed_mpi.py", repo / "examples")
    out = run_example(repo / "examples" / "seed_mpi.py", "3", cwd=tmp_path, timeout=300)
    assert out.startswith("(no ../shared seed here; running the same scenarios")
    _check_seed_mpi(out, 3)


def _torchrun(script: Path, *args: str, cwd: Path, nproc: int = 4,
              timeout: float = 300) -> str:
    """stdout of ``torchrun --standalone --nproc-per-node nproc script args``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", str(script), *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (f"{script.name} under torchrun exited {done.returncode}\n"
                                  f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done.stdout


@pytest.mark.slow  # two torchrun launches of 4 processes (about a minute on 2 cores)
def test_ddp_train_msccl_matches_gloo(tmp_path):
    pytest.importorskip("torch.distributed")
    import torch
    losses, params = {}, {}
    for backend in ("msccl", "gloo"):
        out = _torchrun(EXAMPLES / "ddp_train.py", "--backend", backend, "--out",
                        str(tmp_path / f"{backend}.pt"), cwd=tmp_path)
        losses[backend] = re.findall(r"^step (\d+): loss ([\d.]+)$", out, re.M)
        params[backend] = torch.load(tmp_path / f"{backend}.pt")
    assert [s for s, _ in losses["msccl"]] == ["10", "20", "30"], losses
    assert [float(v) for _, v in losses["msccl"]] == pytest.approx(
        [float(v) for _, v in losses["gloo"]], rel=1e-4)
    # training did something: the loss fell
    assert float(losses["msccl"][-1][1]) < float(losses["msccl"][0][1])
    assert params["msccl"].keys() == params["gloo"].keys() and len(params["msccl"]) == 6
    for name, value in params["msccl"].items():
        assert torch.allclose(value, params["gloo"][name], rtol=1e-5, atol=1e-6), name


def test_ddp_train_without_torch_says_why_and_exits_0(tmp_path):
    code = ("import sys, runpy; sys.modules['torch'] = None; "
            f"runpy.run_path({str(EXAMPLES / 'ddp_train.py')!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no run: this example needs torch")
    assert "pip install torch==2.13.0 --index-url" in done.stdout


@pytest.mark.slow  # one torchrun launch of 2 processes
def test_ddp_train_starts_its_own_ranks_without_torchrun(tmp_path):
    pytest.importorskip("torch.distributed")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    done = subprocess.run([sys.executable, str(EXAMPLES / "ddp_train.py"), "--nproc", "2",
                           "--steps", "10"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "starting torchrun --standalone --nproc-per-node 2" in done.stdout
    assert re.search(r"^step 10: loss [\d.]+$", done.stdout, re.M), done.stdout
