#!/usr/bin/env python3
"""``dist.all_reduce`` on the msccl backend, on gloo, and the communicator called directly.

    python benchmarks/torch_backend.py                   # 4 processes, 4 KiB and 64 MiB
    python benchmarks/torch_backend.py --ranks 4 --sizes 4KiB 1MiB 64MiB --rounds 3

Then ``dist.all_reduce(t, async_op=True)`` of ``--async-bytes`` (25 MB): how
long the call takes to return (msccl hands it to the group's progress thread),
median of 7 after 2 warm-ups, each ``wait()`` checked for the exact sum.

The script starts itself under torchrun (one run, one set of processes).
The default group is ``msccl``; a gloo group over the same ranks is made
with ``dist.new_group(backend="gloo")``, and ``direct`` is the msccl
group's own communicator (``pg.comm.all_reduce(x, out=x)`` on the tensor's
memory), so the three are measured side by side on the same tensors.

Method, the same for each: per size and implementation two warm-up calls
(the first result is checked), then each repetition is ``barrier(); t0;
all_reduce(t); t1`` on every rank with the implementation's own barrier; a
repetition's time is the slowest rank's; the table prints the median (300
repetitions up to 16 KiB, 60 to 1 MiB, 9 above; ``--reps-scale``
multiplies). ``--rounds R`` interleaves R measurements (msccl, gloo, direct,
then again) and keeps each case's best median. float32, in place, SUM.

A second table gives each implementation's processor time per call and rank
(``getrusage``: user + system of all the process's threads, over the same
number of calls made back to back), which a loaded machine inflates less
than the elapsed time: on a machine with fewer cores than ranks, elapsed time
is mostly waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "B": 1}
IMPLS = ("msccl", "gloo", "direct")


def parse_size(text: str) -> int:
    for unit, mult in UNITS.items():
        if text.endswith(unit):
            return int(float(text[:-len(unit)]) * mult)
    return int(text)


def reps_for(nbytes: int, scale: float) -> int:
    base = 300 if nbytes <= 16 << 10 else 60 if nbytes <= 1 << 20 else 9
    return max(3, int(base * scale))


def rank_main(args) -> None:
    import torch
    import torch.distributed as dist

    import msccl_py.torch  # noqa: F401
    dist.init_process_group("msccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    pg = dist.distributed_c10d._get_default_group()
    comm = pg.comm
    results: dict[tuple[str, int], float] = {}
    cpus: dict[tuple[str, int], float] = {}
    sizes = [parse_size(s) for s in args.sizes]
    for _round in range(args.rounds):
        for nbytes in sizes:
            t = torch.full((nbytes // 4,), float(rank + 1))
            a = t.numpy()
            calls = {
                "msccl": (lambda: dist.all_reduce(t), dist.barrier),
                "gloo": (lambda: dist.all_reduce(t, group=gloo),
                         lambda: dist.barrier(group=gloo)),
                "direct": (lambda: comm.all_reduce(a, out=a), comm.barrier),
            }
            for impl in IMPLS:
                call, barrier = calls[impl]
                t.fill_(float(rank + 1))
                call()
                want = world * (world + 1) / 2
                if not torch.all(t == want):
                    raise SystemExit(f"{impl}: wrong result on rank {rank}")
                call()
                times = []
                for _ in range(reps_for(nbytes, args.reps_scale)):
                    t.fill_(1.0)
                    barrier()
                    t0 = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - t0)
                # processor time per call: back to back (no barrier), this process's
                # threads, user + system (gloo's kernel copies and the shm runtime's
                # polling both count); it depends less on the machine's load than time
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                for _ in range(reps_for(nbytes, args.reps_scale)):
                    call()
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / \
                    reps_for(nbytes, args.reps_scale)
                every_cpu = [torch.empty(1, dtype=torch.float64) for _ in range(world)]
                dist.all_gather(every_cpu, torch.tensor([cpu], dtype=torch.float64), group=gloo)
                mean_cpu = float(torch.cat(every_cpu).mean())
                cpus[(impl, nbytes)] = min(cpus.get((impl, nbytes), mean_cpu), mean_cpu)
                mine = torch.tensor(times, dtype=torch.float64)
                every = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(every, mine, group=gloo)
                med = float(np.median(torch.stack(every).max(dim=0).values.numpy()))
                key = (impl, nbytes)
                results[key] = min(results.get(key, med), med)
    issue = _async_issue(args, rank, world, gloo) if args.async_bytes else None
    if rank == 0:
        load = os.getloadavg()[0]
        print(f"{world} processes, float32 all_reduce in place, median of the slowest rank per "
              f"repetition, best of {args.rounds} round(s); load average {load:.1f}")
        print(f"{'size':>8} {'msccl':>12} {'gloo':>12} {'direct':>12} {'gloo/msccl':>11} "
              f"{'msccl/direct':>13} program")
        for nbytes in sizes:
            m, g, d = (results[(i, nbytes)] for i in IMPLS)
            prog = comm.program("allreduce", nbytes, 0, 4, True)
            print(f"{_fmt(nbytes):>8} {m * 1e6:>10.1f}us {g * 1e6:>10.1f}us {d * 1e6:>10.1f}us "
                  f"{g / m:>10.1f}x {m / d:>12.2f}x {prog!r}", flush=True)
        print("processor time per call and rank (user + system, back to back, mean of the "
              "ranks, best round):")
        for nbytes in sizes:
            m, g, d = (cpus[(i, nbytes)] for i in IMPLS)
            print(f"{_fmt(nbytes):>8} {m * 1e6:>10.1f}us {g * 1e6:>10.1f}us {d * 1e6:>10.1f}us "
                  f"{g / m:>10.1f}x {m / d:>12.2f}x", flush=True)
        if issue is not None:
            print(f"async all_reduce of {_fmt(args.async_bytes)} float32 (async_op=True): time "
                  f"until the call returns, median of {ASYNC_REPS} after 2 warm-ups, rank 0: "
                  f"msccl {issue['msccl'] * 1e3:.3f} ms, gloo {issue['gloo'] * 1e3:.3f} ms; "
                  f"wait() then gave the right sum on every rank", flush=True)
    dist.destroy_process_group()


ASYNC_REPS = 7


def _async_issue(args, rank: int, world: int, gloo) -> dict:
    """Median time for ``dist.all_reduce(t, async_op=True)`` to return (the call itself, not
    the reduction), after 2 warm-ups; every ``wait()`` is checked for the exact sum."""
    import torch
    import torch.distributed as dist
    t = torch.empty(args.async_bytes // 4)
    want = float(world * (world + 1) // 2)
    out = {}
    for impl, group in (("msccl", None), ("gloo", gloo)):
        times = []
        for k in range(2 + ASYNC_REPS):
            t.fill_(float(rank + 1))
            dist.barrier(group=group)
            t0 = time.perf_counter()
            work = dist.all_reduce(t, group=group, async_op=True)
            took = time.perf_counter() - t0
            work.wait()
            if not bool((t == want).all()):
                raise SystemExit(f"async {impl}: wrong sum on rank {rank}")
            if k >= 2:
                times.append(took)
        out[impl] = float(np.median(times))
    return out


def _fmt(n: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if n >= UNITS[unit] and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]}{unit}"
    return f"{n}B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--sizes", nargs="+", default=["4KiB", "64MiB"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--reps-scale", type=float, default=1.0)
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--async-bytes", type=parse_size, default=25 * 10 ** 6,
                    help="size of the async all_reduce whose return time is measured "
                         "(0: skip)")
    run_under_torchrun(__file__, ap.parse_args(), rank_main)


def run_under_torchrun(script: str, args, rank_main) -> None:
    """``rank_main(args)`` in a rank; elsewhere start ``script`` (with this command line)
    under torchrun, ``args.ranks`` processes, and exit with its status."""
    if "TORCHELASTIC_RUN_ID" in os.environ:
        rank_main(args)
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE.parent), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.ranks),
           "--master-port", str(args.port), str(Path(script).resolve()), *sys.argv[1:]]
    raise SystemExit(subprocess.call(cmd, env=env))


if __name__ == "__main__":
    main()
