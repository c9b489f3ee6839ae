"""Cluster programs at scale: whole-process compile and verify of the library's programs for
clusters, with their output sizes.

For each rank count (default 1,024: 128 nodes of 8 GPUs) and each program meant for
clusters, runs as separate processes::

    msccl-py compile NAME --ranks N [--param ...] -o OUT.xml
    msccl-py verify OUT.xml

with a cold compile cache (a fresh ``$MSCCL_PY_CACHE`` per compile), and prints wall
seconds, processor seconds (the child's user + system time), peak resident memory of
each, the program's steps (``<step`` elements) and XML bytes. ``--ring`` adds the
ring options the defaults replaced (``inter=ring``) at the sizes given with
``--ring-ranks`` (they grow as ranks²: 1,024 ranks take many minutes). Usage::

    python benchmarks/programs_scale.py [--ranks 256 1024] [--timeout 300] [--ring]

The machine the figures come from may be shared: quote processor seconds beside wall
seconds and say how loaded it was (``uptime``).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_scale import run_once  # noqa: E402

#: (label, library name, parameters at n ranks)
PROGRAMS = [
    ("allreduce_hierarchical", "allreduce_hierarchical", lambda n: ["gpus_per_node=8"]),
    ("allgather_hierarchical", "allgather_hierarchical", lambda n: ["gpus_per_node=8"]),
    ("reduce_scatter_hierarchical", "reduce_scatter_hierarchical",
     lambda n: ["gpus_per_node=8"]),
    ("nccl_tree (dgx-h100)", "nccl_tree", lambda n: ["topology=dgx-h100", f"nodes={n // 8}"]),
    ("allgather_pat", "allgather_pat", lambda n: []),
    ("reduce_scatter_pat", "reduce_scatter_pat", lambda n: []),
]
RING = [
    ("allreduce_hierarchical ring", "allreduce_hierarchical",
     lambda n: ["gpus_per_node=8", "inter=ring"]),
    ("allgather_hierarchical ring", "allgather_hierarchical",
     lambda n: ["gpus_per_node=8", "inter=ring"]),
]


def measured(argv: list[str], timeout: float, env: dict) -> tuple[str, float, float, float]:
    """(status, wall s, processor s, peak MiB) of one child run with ``env`` set."""
    saved = dict(os.environ)
    os.environ.update(env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        status, wall, peak = run_once(argv, timeout)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return status, wall, cpu, peak


def row(label: str, name: str, params: list[str], n: int, timeout: float, tmp: str) -> str:
    out = os.path.join(tmp, f"{name}_{n}.xml")
    argv = [sys.executable, "-m", "msccl_py", "compile", name, "--ranks", str(n)]
    for p in params:
        argv += ["--param", p]
    with tempfile.TemporaryDirectory(dir=tmp) as cache:
        c = measured(argv + ["-o", out], timeout, {"MSCCL_PY_CACHE": cache})
    if c[0] != "ok" or not os.path.exists(out):
        return f"{label:<30} {n:>5}  compile {c[0]} after {c[1]:.1f} s, {c[3]:.0f} MiB"
    text = Path(out).read_text()
    steps, size = text.count("<step "), len(text.encode())
    v = measured([sys.executable, "-m", "msccl_py", "verify", out], timeout, {})
    os.remove(out)
    vtxt = (f"{v[1]:>7.1f} {v[2]:>7.1f} {v[3]:>6.0f}" if v[0] == "ok"
            else f"verify {v[0]}")
    return (f"{label:<30} {n:>5} {c[1]:>7.1f} {c[2]:>7.1f} {c[3]:>6.0f} {steps:>8} "
            f"{size / 1e6:>7.1f} {vtxt}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[1024])
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    p.add_argument("--ring", action="store_true", help="add the inter=ring options")
    p.add_argument("--ring-ranks", type=int, nargs="+", default=[128, 256])
    p.add_argument("--programs", nargs="+", help="labels' library names to run (default: all)")
    args = p.parse_args(argv)
    print(f"{'program':<30} {'ranks':>5} {'comp s':>7} {'cpu s':>7} {'MiB':>6} {'steps':>8} "
          f"{'XML MB':>7} {'ver s':>7} {'cpu s':>7} {'MiB':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(c, n) for n in args.ranks for c in PROGRAMS]
        if args.ring:
            cases += [(c, n) for n in args.ring_ranks for c in RING]
        for (label, name, params), n in cases:
            if args.programs and name not in args.programs:
                continue
            print(row(label, name, params(n), n, args.timeout, tmp), flush=True)


if __name__ == "__main__":
    main()
