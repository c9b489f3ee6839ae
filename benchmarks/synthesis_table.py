"""Synthesized schedules against the bound, NCCL's rings and the library, per machine.

    python benchmarks/synthesis_table.py [--machines mi250 chords12 dgx-a100:2 ...] [--held-out]

Per machine (the topology files with bandwidths, and with ``--held-out`` the
shapes of ``tests/synthesis/synth_machines.py``, which ``--machines`` also
names; ``NAME:K`` is a cluster of K copies): the allgather bound; the
synthesized allgather's algbw at 1 GiB as ``msccl-py simulate`` predicts it
and as the full simulation of every pipeline iteration gives it (the model
extrapolates once the pipeline repeats itself; the two agree);
``nccl_ring_allgather`` and the best library allgather; the same for
allreduce (with the any-form bound, which overlapped phases cannot beat), and
each schedule's chunks per loop (MSCCL runs it where they divide the call's
element count); the synthesized latency allgather at 1 KiB against the library's
best; solve times (wall and CPU seconds: on a shared machine the CPU time is
the one that does not depend on the load). Library candidates are every
program of the collective at 1, 2 and 4 instances and 1, 4 or 8 channels
(``msccl_py.tuning.tune``; clusters of more than 16 ranks: 1 and 2 instances,
1 and 4 channels).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "synthesis"))

from msccl_py.plan.tables import plan_for  # noqa: E402
from msccl_py.simulate import machine_model, simulate  # noqa: E402
from msccl_py.simulate.engine import run  # noqa: E402
from msccl_py.synthesis import any_allreduce_bound, synthesize  # noqa: E402
from msccl_py.synthesis.search import runs_at  # noqa: E402
from msccl_py.topologies import load  # noqa: E402
from msccl_py.tuning.tune import library_candidates  # noqa: E402
from msccl_py.tuning.nccl import simulate_baseline  # noqa: E402

FILES = ["dgx1", "ndv2", "dgx2", "dgx-a100", "dgx-h100", "hgx-h200", "mi250", "mi300x", "ndv4",
         "ndv5"]
GIB, KIB = 1 << 30, 1 << 10
#: library sweep (the tuner's, narrowed: 16-rank programs at 16 channels x 4 instances take
#: minutes to compile)
INSTANCES, CHANNELS = (1, 2, 4), (1, 4, 8)


def full_algbw(alg, m, nbytes=GIB) -> float:
    """algbw with every pipeline iteration simulated (no steady-state extrapolation)."""
    t = run(plan_for(alg), m, nbytes, alg.protocol, extrapolate=False)
    return nbytes / ((t.time_us + m.protocol(alg.protocol).base_us) * 1e3)


def library_best(coll, ref, n, m, nodes, nbytes):
    big = n > 16
    cands, _ = library_candidates(coll, ref, n, nodes=nodes,
                                  instances=(1, 2) if big else INSTANCES,
                                  channels=(1, 4) if big else CHANNELS)
    best = {"nccl": (0.0, "-"), "lib": (0.0, "-")}
    for c in cands:
        try:
            bw = simulate(c.alg, m, nbytes)[0].algbw_GBps
        except Exception:   # noqa: BLE001 - a candidate the model cannot time is no baseline
            continue
        key = "nccl" if c.label.startswith("nccl_ring") else "lib"
        if bw > best[key][0]:
            best[key] = (bw, c.label)
    if best["nccl"][0] == 0.0:
        # none of the channel counts tried builds here: the ring as NCCL itself runs the size
        name = "nccl_ring" if coll == "allreduce" else f"nccl_ring_{coll}"
        (r,), ((proto, count),) = simulate_baseline(name, m, [nbytes], topology=ref,
                                                    nodes=nodes)
        best["nccl"] = (r.algbw_GBps, f"{name} as NCCL runs it ({proto} x{count})")
    return best


def row(name, ref, nodes):
    topo = load(ref, nodes=nodes)
    m = machine_model(topo)
    n = topo.num_nodes()
    out = [name]
    for coll in ("allgather", "allreduce"):
        t0, c0 = time.perf_counter(), time.process_time()
        s = synthesize(ref, coll, nodes=nodes)
        solve, cpu = time.perf_counter() - t0, time.process_time() - c0
        b = s.bound.algbw_GBps
        sim = simulate(s.algorithm, m, GIB)[0].algbw_GBps
        full = full_algbw(s.algorithm, m)
        lib = library_best(coll, ref, n, m, nodes, GIB)
        chunks = s.algorithm.nchunksperloop
        anyform = ""
        if coll == "allreduce":
            a = any_allreduce_bound(topo, in_switch=False).algbw_GBps   # GPUs add every sum
            anyform = f", any-form bound {a:.1f} (synth {sim / a:.1%})"
        out.append(f"{coll}: bound {b:.1f}, synth {sim:.1f} ({sim / b:.1%}; full {full / b:.1%}) "
                   f"[{s.chosen.label} x{s.chosen.instances}, {chunks} chunks per loop, "
                   f"{'runs' if runs_at(s.algorithm, GIB) else 'does not run'} at 1 GiB]"
                   f"{anyform}, nccl_ring {lib['nccl'][0]:.1f} "
                   f"({lib['nccl'][0] / b:.1%}), library {lib['lib'][0]:.1f} ({lib['lib'][1]}), "
                   f"solve {solve:.1f} s ({cpu:.1f} s CPU)")
    for coll in ("allgather", "allreduce"):
        s = synthesize(ref, coll, nodes=nodes, objective="latency")
        mine = simulate(s.algorithm, m, KIB)[0].time_us
        cands, _ = library_candidates(coll, ref, n, nodes=nodes, instances=(1, 2),
                                      channels=(1, 2, 4, 8))
        lib = min((simulate(c.alg, m, KIB)[0].time_us, c.label) for c in cands)
        out.append(f"latency 1 KiB {coll}: synth {mine:.2f} us [{s.chosen.label}], "
                   f"library {lib[0]:.2f} us ({lib[1]})")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--machines", nargs="+", default=FILES)
    p.add_argument("--held-out", action="store_true", help="also the test suite's shapes")
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} (solve times under load are not comparable)")
    from synth_machines import TEXTS, topology_file
    todo = []
    for spec in args.machines:
        name, _, k = spec.partition(":")
        if name in TEXTS:
            todo.append((spec, *topology_file(name)))
        else:
            todo.append((spec, name, int(k) if k else None))
    if args.held_out:
        todo += [(name, *topology_file(name)) for name in TEXTS if name not in args.machines]
    for name, ref, nodes in todo:
        for line in row(name, ref, nodes):
            print(line if line == name else f"  {line}", flush=True)


if __name__ == "__main__":
    main()
