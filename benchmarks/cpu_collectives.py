#!/usr/bin/env python3
"""Time CPU collectives side by side: msccl_py's shm runtime and the usual alternatives.

Implementations (each skipped with a note when not installed):

* ``shm``: ``msccl_py.launch`` + ``Communicator`` (library programs on the
  shared-memory runtime), calls with ``out=`` so no result is allocated;
* ``pipe``: ``pipe_ring.py``, our minimal re-implementation of the seed's
  pipe-and-pickle library (a baseline, not part of msccl_py);
* ``gloo``: ``torch.distributed`` with the gloo backend;
* ``mpi``: OpenMPI through ``mpi4py`` (started with ``mpirun``).

Method, identical for every implementation: ranks are started once per
(implementation, rank count); each (collective, size) gets warm-up calls,
then every repetition is ``barrier(); t0; call; t1`` on every rank; a
repetition's time is the slowest rank's; the table shows the median.
Sizes are per rank: the allreduce buffer, the allgather *output*, the
alltoall send buffer (nccl-tests' convention). Bus bandwidth = size / time x
``2(n-1)/n`` (allreduce) or ``(n-1)/n`` (allgather, alltoall).

    python benchmarks/cpu_collectives.py                    # the full table
    python benchmarks/cpu_collectives.py --ranks 4 --sizes 4KiB 64MiB --collectives allreduce
    python benchmarks/cpu_collectives.py --rounds 3           # best of 3 interleaved rounds
    python benchmarks/cpu_collectives.py --idle-wait 8        # CPU of ranks waiting 2 s
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

COLLECTIVES = ("allreduce", "allgather", "alltoall")
IMPLS = ("shm", "pipe", "gloo", "mpi")
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "B": 1}


def parse_size(text: str) -> int:
    for unit, mult in UNITS.items():
        if text.endswith(unit):
            return int(float(text[:-len(unit)]) * mult)
    return int(text)


def fmt_size(n: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if n >= UNITS[unit] and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]} {unit}"
    return f"{n} B"


def reps_for(nbytes: int, scale: float) -> int:
    base = 300 if nbytes <= 16 << 10 else 60 if nbytes <= 1 << 20 else 15 if nbytes <= 8 << 20 \
        else 9
    return max(3, int(base * scale))


def buffers(coll: str, nbytes: int, n: int, fill: float = 1.0):
    """(input, output) float32 arrays for one call of ``coll`` at ``nbytes`` per rank."""
    elems = nbytes // 4
    if coll == "allgather":
        x = np.full(max(1, elems // n), fill, dtype=np.float32)
        return x, np.empty(x.size * n, dtype=np.float32)
    x = np.full(max(n, elems - elems % n), fill, dtype=np.float32)
    return x, np.empty_like(x)


def bus_factor(coll: str, n: int) -> float:
    return 2 * (n - 1) / n if coll == "allreduce" else (n - 1) / n


def timed_loop(barrier, calls: dict, plan: list) -> dict:
    """Run the plan on one rank: {(coll, nbytes): [seconds per repetition]}."""
    out = {}
    for coll, nbytes, reps, n in plan:
        x, y = buffers(coll, nbytes, n)
        call = calls[coll]
        for _ in range(2):
            call(x, y)
        ts = []
        for _ in range(reps):
            barrier()
            t0 = time.perf_counter()
            call(x, y)
            ts.append(time.perf_counter() - t0)
        out[f"{coll}:{nbytes}"] = ts
    return out


# ----- implementations (each returns per-rank results) ----------------------------------
def _shm_rank(comm, plan):
    calls = {"allreduce": lambda x, y: comm.all_reduce(x, out=y),
             "allgather": lambda x, y: comm.all_gather(x, out=y),
             "alltoall": lambda x, y: comm.all_to_all(x, out=y)}
    times = timed_loop(comm.barrier, calls, plan)
    names = {}
    for coll, nbytes, _, n in plan:
        x, _ = buffers(coll, nbytes, n)
        names[f"{coll}:{nbytes}"] = comm.program(coll, x.nbytes)[0].name
    return times, names


def run_shm(n: int, plan: list):
    import msccl_py
    res = msccl_py.launch(_shm_rank, n, args=(plan,))
    return [r[0] for r in res], res[0][1]


def _pipe_rank(rank, n, pipes, plan, queue):
    from pipe_ring import PipeComm
    comm = PipeComm(rank, n, pipes)
    calls = {"allreduce": lambda x, y: comm.all_reduce(x),
             "allgather": lambda x, y: comm.all_gather(x),
             "alltoall": lambda x, y: comm.all_to_all(x)}
    queue.put((rank, timed_loop(comm.barrier, calls, plan)))


def run_pipe(n: int, plan: list):
    from pipe_ring import make_pipes
    ctx = mp.get_context("fork")
    pipes = make_pipes(n, ctx)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_pipe_rank, args=(r, n, pipes, plan, queue)) for r in range(n)]
    for p in procs:
        p.start()
    got = dict(queue.get() for _ in range(n))
    for p in procs:
        p.join()
    names = {f"{c}:{b}": "seed-style pipe " + {"allreduce": "ring", "allgather": "ring",
                                                "alltoall": "pairwise"}[c] for c, b, _, _ in plan}
    return [got[r] for r in range(n)], names


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_rank(rank, n, port, plan, queue):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n)

    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def allgather(x, y):
        gather(torch.from_numpy(y), torch.from_numpy(x))

    calls = {"allreduce": lambda x, y: dist.all_reduce(torch.from_numpy(x)),
             "allgather": allgather,
             "alltoall": lambda x, y: dist.all_to_all_single(torch.from_numpy(y),
                                                              torch.from_numpy(x))}
    try:
        queue.put((rank, timed_loop(dist.barrier, calls, plan)))
    except Exception as exc:  # an op gloo lacks: time what it has
        queue.put((rank, f"{type(exc).__name__}: {exc}"))
    dist.destroy_process_group()


def run_gloo(n: int, plan: list):
    ctx = mp.get_context("spawn")
    port = _free_port()
    queue = ctx.Queue()
    results = {}
    # one process group per collective, so one that gloo lacks does not hide the others
    for coll in COLLECTIVES:
        sub = [p for p in plan if p[0] == coll]
        if not sub:
            continue
        port = _free_port()
        procs = [ctx.Process(target=_gloo_rank, args=(r, n, port, sub, queue))
                 for r in range(n)]
        for p in procs:
            p.start()
        got = dict(queue.get() for _ in range(n))
        for p in procs:
            p.join()
        for r in range(n):
            if isinstance(got[r], str):
                print(f"  gloo {coll}: {got[r]}", file=sys.stderr)
                break
        else:
            for r in range(n):
                results.setdefault(r, {}).update(got[r])
    names = {f"{c}:{b}": "gloo default" for c, b, _, _ in plan}
    return [results.get(r, {}) for r in range(n)], names


def mpi_worker(plan: list) -> None:
    """Entry point under mpirun: time the plan, rank 0 prints every rank's times as JSON."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    calls = {"allreduce": lambda x, y: comm.Allreduce(x, y),
             "allgather": lambda x, y: comm.Allgather(x, y),
             "alltoall": lambda x, y: comm.Alltoall(x, y)}
    times = timed_loop(comm.Barrier, calls, plan)
    every = comm.gather(times, root=0)
    if comm.rank == 0:
        print("MPI-RESULT " + json.dumps(every))


def run_mpi(n: int, plan: list):
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-n", str(n), sys.executable,
           str(Path(__file__).resolve()), "--mpi-worker", json.dumps(plan)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("MPI-RESULT "):
            names = {f"{c}:{b}": "OpenMPI default" for c, b, _, _ in plan}
            return json.loads(line[len("MPI-RESULT "):]), names
    raise RuntimeError(f"mpirun failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")


def available(impl: str) -> str | None:
    """None when ``impl`` can run here, else why not."""
    try:
        if impl == "gloo":
            import torch.distributed as dist
            if not dist.is_gloo_available():
                return "torch has no gloo"
        elif impl == "mpi":
            import mpi4py  # noqa: F401
            if shutil.which("mpirun") is None:
                return "mpirun not found"
    except ImportError as exc:
        return f"not installed ({exc.name})"
    return None


def _idle_rank(comm, seconds):
    x = np.ones(1024, dtype=np.float32)
    comm.all_reduce(x)          # program chosen and compiled before the wait
    comm.barrier()
    if comm.rank == 0:
        time.sleep(seconds)
    wall, cpu = time.monotonic(), time.process_time()
    comm.all_reduce(x)
    return time.monotonic() - wall, time.process_time() - cpu


def idle_wait(n: int, seconds: float = 2.0) -> None:
    """Print the CPU time ranks 1..n-1 use while they wait ``seconds`` for rank 0."""
    import msccl_py
    res = msccl_py.launch(_idle_rank, n, args=(seconds,))
    cpu = [c for _, c in res[1:]]
    wall = float(np.median([w for w, _ in res[1:]]))
    print(f"idle wait, {n} ranks on {os.cpu_count()} CPUs: ranks 1..{n - 1} waited {wall:.2f} s "
          f"(median) using {sum(cpu) * 1e3:.1f} ms of CPU in all (most {max(cpu) * 1e3:.1f} ms)")


RUNNERS = {"shm": run_shm, "pipe": run_pipe, "gloo": run_gloo, "mpi": run_mpi}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", nargs="+", default=["4KiB", "256KiB", "4MiB", "64MiB"])
    ap.add_argument("--collectives", nargs="+", default=list(COLLECTIVES), choices=COLLECTIVES)
    ap.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    ap.add_argument("--reps-scale", type=float, default=1.0,
                    help="multiply the repetition counts (default 1)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat everything this many times, implementations interleaved, "
                         "and keep each case's best median (steadier on a shared machine)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--idle-wait", type=int, metavar="RANKS",
                    help="instead of timing, measure the CPU that RANKS-1 ranks use while "
                         "they wait 2 s in an allreduce for rank 0")
    ap.add_argument("--mpi-worker", metavar="PLAN", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.mpi_worker:
        mpi_worker(json.loads(args.mpi_worker))
        return 0
    if args.idle_wait:
        idle_wait(args.idle_wait)
        return 0
    sizes = [parse_size(s) for s in args.sizes]
    best: dict[tuple, dict] = {}
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    impls = []
    for impl in args.impls:
        why = available(impl)
        if why:
            print(f"# {impl}: skipped, {why}", flush=True)
        else:
            impls.append(impl)
    for rnd, impl, n in ((r, i, n) for r in range(max(1, args.rounds)) for n in args.ranks
                         for i in impls):
        plan = [(c, b, reps_for(b, args.reps_scale), n) for c in args.collectives
                for b in sizes]
        t0 = time.monotonic()
        try:
            per_rank, names = RUNNERS[impl](n, plan)
        except Exception as exc:
            print(f"# {impl} x{n}: failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        for coll, nbytes, _, _ in plan:
            key = f"{coll}:{nbytes}"
            if not all(key in r for r in per_rank):
                continue
            slowest = np.max(np.array([r[key] for r in per_rank]), axis=0)
            t = float(np.median(slowest))
            case = (impl, n, coll, nbytes)
            if case not in best or t < best[case]["median_s"]:
                best[case] = {"impl": impl, "ranks": n, "collective": coll,
                              "bytes": nbytes, "median_s": t,
                              "algorithm": names.get(key, ""),
                              "busbw_GBps": nbytes / t * bus_factor(coll, n) / 1e9}
        print(f"# round {rnd + 1} {impl} x{n}: {time.monotonic() - t0:.1f} s, load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    rows = list(best.values())
    rows.sort(key=lambda r: (r["collective"], r["bytes"], r["ranks"], IMPLS.index(r["impl"])))
    head = (f"{'collective':<10} {'size':>8} {'ranks':>5} {'impl':<5} {'median':>11} "
            f"{'busbw GB/s':>10}  algorithm")
    print(head)
    print("-" * len(head))
    for r in rows:
        t = r["median_s"]
        tt = f"{t * 1e6:.1f} us" if t < 1e-3 else f"{t * 1e3:.2f} ms"
        print(f"{r['collective']:<10} {fmt_size(r['bytes']):>8} {r['ranks']:>5} {r['impl']:<5} "
              f"{tt:>11} {r['busbw_GBps']:>10.3f}  {r['algorithm']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
