"""Simulator scaling: the 130k-step ring allreduce at 23 sizes, and cost per size vs size.

The target case of ``compile_scale.py`` (ring allreduce, 128 ranks, 8
channels, 4 instances: about 130,000 XML steps) is read back from its XML
(as ``msccl-py simulate FILE.xml`` would) and simulated on 16 NDv5 nodes at
the 23 sizes 1 KiB..4 GiB, with bottleneck labels and without (``labels=False``,
which skips what only the labels need: the hop chain, which the labels mostly
take from bounds computed once per plan). Also prints the time of one size at
1 MiB and at 4 GiB: the engine extrapolates the pipeline's steady state, so
the second should cost about the same as the first. Usage::

    python benchmarks/simulate_scale.py [--repeat 3] [--ranks 128] [--topology ndv5]

Figures are medians of ``--repeat`` runs in this process; the first
simulation of a plan also builds its level structure, which the ``first``
column includes and the medians (later calls) do not.

``--whole 16,128`` instead times whole processes, side by side: ``msccl-py simulate
PROGRAM --topology dgx-h100 --nodes K --sizes 1MiB,64MiB,1GiB`` (PROGRAM
``allreduce_hierarchical`` unless ``--program``) with the fast path and with
``--exact``, median wall time and peak memory of ``--repeat`` runs after one
untimed run that fills the library's compile cache (so the figures are the
simulation's and the cached program's, not the first compile's)::

    python benchmarks/simulate_scale.py --whole 16,128 [--program allreduce_ring]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "programs"))

from allreduce_ring import allreduce_ring  # noqa: E402
from medians import median_seconds  # noqa: E402

from msccl_py.plan.tables import plan_for  # noqa: E402
from msccl_py.simulate import machine_model, simulate  # noqa: E402
from msccl_py.topologies import load  # noqa: E402
from msccl_py.targets.msccl import read_xml  # noqa: E402



def run_child(argv: list[str], timeout: float) -> tuple[str, float, float, float]:
    """(status, wall s, processor s, peak RSS MiB) of one child process."""
    import os
    import subprocess
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    state = "ok"
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            state = "timeout"
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if state == "ok" and proc.returncode:
        state = f"exit {proc.returncode}"
    return (state, time.perf_counter() - t0, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def whole(nodes: list[int], program: str, repeat: int, timeout: float) -> None:
    """Whole-process wall time, processor time and peak memory of simulate, fast path and
    --exact."""
    import statistics
    print(f"{'nodes':>5} {'GPUs':>5} {'mode':<6} {'wall s':>7} {'cpu s':>7} {'peak MiB':>9}  "
          f"status")
    for k in nodes:
        base = [sys.executable, "-m", "msccl_py", "simulate", program, "--topology",
                "dgx-h100", "--nodes", str(k), "--sizes", "1MiB,64MiB,1GiB"]
        run_child(base, timeout)                  # fills the compile cache, untimed
        for mode, argv in (("fast", base), ("exact", base + ["--exact"])):
            runs = [run_child(argv, timeout) for _ in range(repeat)]
            state = next((r[0] for r in runs if r[0] != "ok"), "ok")
            wall = statistics.median(r[1] for r in runs)
            cpu = statistics.median(r[2] for r in runs)
            peak = max(r[3] for r in runs)
            print(f"{k:>5} {8 * k:>5} {mode:<6} {wall:>7.2f} {cpu:>7.2f} {peak:>9.0f}  {state}",
                  flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=128)
    p.add_argument("--topology", default="ndv5")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--whole", default=None, metavar="K,K",
                   help="time whole `msccl-py simulate` processes at these node counts")
    p.add_argument("--program", default="allreduce_hierarchical")
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    if args.whole:
        whole([int(k) for k in args.whole.split(",")], args.program, args.repeat, args.timeout)
        return
    prog = allreduce_ring(args.ranks, 8, 4)
    prog.check_xml = False
    alg = read_xml(prog.generate_xml())
    nodes = max(1, args.ranks // 8)
    machine = machine_model(load(args.topology, nodes=nodes))
    steps = plan_for(alg).nsteps
    t0 = time.perf_counter()
    results = simulate(alg, machine, "1KiB:4GiB")
    first = time.perf_counter() - t0
    sweep = median_seconds(lambda: simulate(alg, machine, "1KiB:4GiB"), args.repeat)
    bare = median_seconds(lambda: simulate(alg, machine, "1KiB:4GiB", labels=False),
                          args.repeat)
    small = median_seconds(lambda: simulate(alg, machine, "1MiB"), args.repeat)
    large = median_seconds(lambda: simulate(alg, machine, "4GiB"), args.repeat)
    print(f"ring allreduce {args.ranks} ranks x 8 ch x 4 inst: {steps} steps on "
          f"{args.topology} x {nodes}")
    print(f"  {len(results)} sizes 1KiB..4GiB: first {first:.2f} s (with plan and levels), "
          f"median {sweep:.2f} s; without labels {bare:.2f} s (labels x{sweep / bare:.2f})")
    print(f"  one size: 1 MiB {small * 1e3:.1f} ms, 4 GiB {large * 1e3:.1f} ms, "
          f"ratio {large / small:.2f}")
    for r in (results[0], results[10], results[-1]):
        print(f"  {r.bytes:>11} B  {r.time_us:10.1f} us  busbw {r.busbw_GBps:7.2f} GB/s  "
              f"{r.bottleneck}")


if __name__ == "__main__":
    main()
