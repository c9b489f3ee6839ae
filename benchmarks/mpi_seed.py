"""msccl_py.mpi.all_reduce against the seed's own all_reduce, same method, one run.

The seed (``../shared/seeds/nccl_in_500_locs_mpi.txt``) is loaded from its
text at run time and runs unchanged but for one thing: its pipe ends are
wrapped so that a send above 32 KiB happens on a helper thread. As written,
every rank of the seed's ring sends a block before it receives one, which
deadlocks once a block exceeds the pipe's kernel buffer (at 64 MiB on 4
ranks each block is 16 MiB).

Method, for both: the ranks start once; per size two warm-up calls, then each
repetition is ``x = base.copy(); barrier(); t0; all_reduce(x); t1`` on every
rank (each library's own barrier); a repetition's time is the slowest rank's;
the table shows the median. ``--rounds R`` repeats everything R times with
the two interleaved and keeps each case's best median (steadier on a shared
machine).

    python benchmarks/mpi_seed.py                          # 4 ranks, 4 KiB and 64 MiB
    python benchmarks/mpi_seed.py --ranks 8 --sizes 4KiB 1MiB --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import sys
import threading
import time
import types
from pathlib import Path

import numpy as np

from msccl_py import mpi

SEED = Path(__file__).resolve().parents[1].parent / "shared" / "seeds" / \
    "nccl_in_500_locs_mpi.txt"
THREAD_SEND_BYTES = 32 << 10
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def load_seed(path: Path) -> types.ModuleType:
    """The seed's module, from the code in its text (without its ``__main__`` block)."""
    text = path.read_text()
    code = text[text.index("#!/usr/bin/env python3"):]
    code = code[:code.index('if __name__ == "__main__":')]
    module = types.ModuleType("seed_mpi")
    exec(compile(code, str(path), "exec"), module.__dict__)
    return module


class ThreadedSend:
    """A pipe end whose large sends run on a helper thread (one at a time, in order)."""

    def __init__(self, conn):
        self.conn = conn
        self.pending: threading.Thread | None = None

    def send(self, obj) -> None:
        if self.pending is not None:
            self.pending.join()
            self.pending = None
        if getattr(obj, "nbytes", 0) <= THREAD_SEND_BYTES:
            self.conn.send(obj)
            return
        self.pending = threading.Thread(target=self.conn.send, args=(obj,))
        self.pending.start()

    def recv(self):
        return self.conn.recv()


def parse_size(text: str) -> int:
    for unit, factor in sorted(UNITS.items(), key=lambda u: -len(u[0])):
        if text.endswith(unit):
            return int(float(text[:-len(unit)]) * factor)
    return int(text)


def reps_for(nbytes: int) -> int:
    return 300 if nbytes <= 16 << 10 else 60 if nbytes <= 1 << 20 else 12 if nbytes <= 8 << 20 \
        else 5


def timed(lib, rank: int, n: int, sizes: list[int]) -> dict:
    """Per size: this rank's time of every repetition (after checking one result)."""
    out = {}
    for nbytes in sizes:
        base = np.full(nbytes // 4, rank + 1, dtype=np.float32)
        for _ in range(2):
            got = lib.all_reduce(base.copy())
        if not np.all(got == n * (n + 1) / 2):
            raise RuntimeError(f"{lib.__name__}: wrong all_reduce result on rank {rank}")
        ts = []
        for _ in range(reps_for(nbytes)):
            x = base.copy()
            lib.barrier()
            t0 = time.perf_counter()
            lib.all_reduce(x)
            ts.append(time.perf_counter() - t0)
        out[nbytes] = ts
    return out


def _ours(rank, world_size, shared_mem, pipe_pairs, sizes):
    mpi.init_env(rank, world_size, shared_mem, pipe_pairs)
    return timed(mpi, rank, world_size, sizes)


def _seeds(seed, queue, sizes, rank, world_size, shared_mem, pipe_pairs):
    pipes = {key: ThreadedSend(conn) for key, conn in pipe_pairs.items()}
    seed.init_env(rank, world_size, shared_mem, pipes)
    queue.put((rank, timed(seed, rank, world_size, sizes)))


def run_ours(n: int, sizes: list[int]) -> list[dict]:
    return mpi.mpi_frame(functools.partial(_ours, sizes=sizes), world_size=n)


def run_seed(seed, n: int, sizes: list[int]) -> list[dict]:
    queue = mp.get_context("fork").Queue()
    seed.mpi_frame(functools.partial(_seeds, seed, queue, sizes), world_size=n)
    got = dict(queue.get(timeout=60) for _ in range(n))
    return [got[r] for r in range(n)]


def fmt(nbytes: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if nbytes >= UNITS[unit] and nbytes % UNITS[unit] == 0:
            return f"{nbytes // UNITS[unit]} {unit}"
    return f"{nbytes} B"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4, help="world size (default 4)")
    ap.add_argument("--sizes", nargs="+", default=["4KiB", "64MiB"],
                    help="all_reduce bytes per rank, float32 (default 4KiB 64MiB)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the whole measurement, interleaved; keep each best median")
    ap.add_argument("--seed", type=Path, default=SEED, help="the seed's text (default "
                    "../shared/seeds/nccl_in_500_locs_mpi.txt)")
    args = ap.parse_args(argv)
    if not args.seed.is_file():
        print(f"error: the seed is not at {args.seed} (pass --seed)", file=sys.stderr)
        return 2
    seed = load_seed(args.seed)
    sizes = [parse_size(s) for s in args.sizes]
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs, {args.ranks} ranks, float32, {args.rounds} round(s)")
    best: dict = {}
    for _ in range(args.rounds):
        for impl, run in (("msccl_py.mpi", run_ours),
                          ("seed", lambda n, s: run_seed(seed, n, s))):
            per_rank = run(args.ranks, sizes)
            for nbytes in sizes:
                slowest = np.max([per_rank[r][nbytes] for r in range(args.ranks)], axis=0)
                t = float(np.median(slowest))
                best[(nbytes, impl)] = min(t, best.get((nbytes, impl), t))
    print(f"{'size':>8}  {'msccl_py.mpi':>14}  {'seed':>14}  {'speedup':>8}")
    for nbytes in sizes:
        ours, theirs = best[(nbytes, "msccl_py.mpi")], best[(nbytes, "seed")]
        print(f"{fmt(nbytes):>8}  {ours * 1e6:>11.1f} us  {theirs * 1e6:>11.1f} us  "
              f"{theirs / ours:>7.2f}x")
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
