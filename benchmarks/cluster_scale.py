"""Cluster scale: whole-process time and peak memory of the cluster commands at 128, 1,024
and 8,192 GPUs.

For each size (DGX H100 machines: 16, 128 and 1,024 of them, or the rail-optimized
fabric files with ``--fabric``) runs, as separate processes:

* ``msccl-py topology show ...`` (the summary: bisection, fabric rows);
* ``msccl-py topology bound ... --collective allreduce --json``;
* ``msccl-py simulate nccl ...`` (the NCCL-choice target; reported as skipped when this
  checkout has no such target);
* ``msccl-py simulate allreduce_hierarchical ...``;
* ``msccl-py synthesize --collective allreduce ...``, and then, on the schedule it wrote,
  ``msccl-py verify``, ``msccl-py simulate`` at 1 GiB (its busbw against the any-form
  bound of ``topology bound`` and against ``simulate nccl``).

Each command runs ``--repeat`` times; the table gives the median wall time and the
largest peak resident memory (``os.wait4``'s ``ru_maxrss`` of that child), or
``timeout``/``failed``. Usage::

    python benchmarks/cluster_scale.py [--gpus 128,1024] [--repeat 3] [--timeout 120] [--fabric]

The machine the figures come from is shared: quote medians and say how loaded it was.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: --fabric: the cluster file of each size
FABRIC_FILES = {1024: "rail-h100-128", 8192: "rail-h100-1024"}


def run_once(argv: list[str], timeout: float) -> tuple[str, float, float]:
    """(status, wall seconds, peak RSS MiB) of one child process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            return "timeout", time.perf_counter() - t0, usage.ru_maxrss / 1024
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
    proc.stderr.close()
    state = "ok" if code == 0 else f"exit {code}: {err[-1] if err else ''}"
    return state, wall, usage.ru_maxrss / 1024


def has_nccl_target() -> bool:
    """Whether ``msccl-py simulate nccl`` exists in this checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "msccl_py", "simulate", "nccl", "--topology",
                          "dgx-h100", "--sizes", "1MiB"], capture_output=True, text=True,
                         env=env)
    return out.returncode == 0


def commands(gpus: int, fabric: bool, out_dir: str) -> list[tuple[str, list[str] | None]]:
    nodes = gpus // 8
    where = (["--topology", FABRIC_FILES[gpus]] if fabric and gpus in FABRIC_FILES
             else ["--topology", "dgx-h100", "--nodes", str(nodes)])
    bound_where = ([FABRIC_FILES[gpus]] if fabric and gpus in FABRIC_FILES
                   else ["dgx-h100", "--nodes", str(nodes)])
    py = [sys.executable, "-m", "msccl_py"]
    sizes = ["--sizes", "1MiB,64MiB,1GiB"]
    return [
        ("topology show", py + ["topology", "show", *bound_where]),
        ("topology bound", py + ["topology", "bound", *bound_where, "--collective",
                                 "allreduce", "--json"]),
        ("simulate nccl", py + ["simulate", "nccl", *where, *sizes]),
        ("simulate allreduce_hierarchical",
         py + ["simulate", "allreduce_hierarchical", *where, *sizes]),
        ("synthesize", py + ["synthesize", "--collective", "allreduce", *where, "-o",
                             os.path.join(out_dir, f"synth{gpus}.xml")]),
    ]


def figures(gpus: int, fabric: bool, out_dir: str, timeout: float) -> str:
    """The synthesized schedule of ``gpus`` GPUs (written by the ``synthesize`` row):
    ``msccl-py verify`` on it, its busbw at 1 GiB by ``msccl-py simulate``, the share of
    ``topology bound``'s any-form algbw, and ``simulate nccl``'s busbw there."""
    import json
    path = os.path.join(out_dir, f"synth{gpus}.xml")
    if not os.path.exists(path):
        return f"{gpus} GPUs: no synthesized schedule (the synthesize row failed or was skipped)"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argvs = dict(commands(gpus, fabric, out_dir))
    bound_argv, nccl_argv = argvs["topology bound"], argvs["simulate nccl"]
    topo = nccl_argv[nccl_argv.index("--topology"):nccl_argv.index("--sizes")]
    py = [sys.executable, "-m", "msccl_py"]

    def out(argv):
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
        return r, time.perf_counter() - t0
    v, vs = out(py + ["verify", path])
    sim, ss = out(py + ["simulate", path, *topo, "--sizes", "1GiB"])
    nccl, _ = out(nccl_argv[:nccl_argv.index("--sizes")] + ["--sizes", "1GiB"])
    b, _ = out(bound_argv)

    def busbw(r) -> float | None:
        for line in r.stdout.splitlines():
            parts = line.split()
            if parts[:2] == ["1", "GiB"]:
                return float(parts[4])
        return None
    mine, theirs = busbw(sim), busbw(nccl)
    share = ""
    if b.returncode == 0 and mine is not None:
        any_form = json.loads(b.stdout)["any_form"]["busbw_GBps"]
        share = f" = {mine / any_form:.1%} of the any-form bound ({any_form:.1f})"
    verdict = (v.stdout.splitlines() or ["?"])[0] if v.returncode == 0 else "verify failed"
    return (f"{gpus} GPUs: {verdict} ({vs:.1f} s); simulated at 1 GiB in {ss:.1f} s: "
            f"{mine} GB/s busbw{share}; simulate nccl: {theirs} GB/s busbw")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", default="128,1024,8192",
                   help="comma list of GPU counts (multiples of 8)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds before a run is killed and reported as a timeout")
    p.add_argument("--fabric", action="store_true",
                   help="use the rail-optimized fabric files where one has the size")
    p.add_argument("--only", default=None,
                   help="comma list of command labels to run (default: all)")
    args = p.parse_args(argv)
    nccl = has_nccl_target()
    only = set(args.only.split(",")) if args.only else None
    rows = [("GPUs", "command", "median wall s", "peak MiB", "status")]
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in (int(g) for g in args.gpus.split(",")):
            for label, argv_ in commands(gpus, args.fabric, tmp):
                if only and label not in only:
                    continue
                if label == "simulate nccl" and not nccl:
                    rows.append((str(gpus), label, "-", "-",
                                 "skipped: no `nccl` target in this checkout"))
                    continue
                runs = []
                for _ in range(args.repeat):   # a failure or a timeout would repeat
                    runs.append(run_once(argv_, args.timeout))
                    if runs[-1][0] != "ok":
                        break
                status = next((s for s, _, _ in runs if s != "ok"), "ok")
                if status == "timeout":
                    wall = f">{args.timeout:g}"
                else:
                    wall = f"{statistics.median(w for _, w, _ in runs):.2f}"
                peak = f"{max(m for _, _, m in runs):.0f}"
                rows.append((str(gpus), label, wall, peak, status))
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
            if not only or "synthesize" in only:
                notes.append(figures(gpus, args.fabric, tmp, args.timeout))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    if notes:
        print("\nsynthesized schedules (verify, simulate at 1 GiB):")
        print("\n".join(notes))
    load = os.getloadavg()
    print(f"\n{args.repeat} runs each; load average at the end {load[0]:.1f} "
          f"on {os.cpu_count()} CPUs (a shared machine: figures are noisy)")


if __name__ == "__main__":
    main()
