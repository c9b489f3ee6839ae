"""How far `simulate nccl` is from published nccl-tests / rccl-tests logs, per log and pooled.

For every log (tests/data/nccl_tests/ and any --logs DIR), the machine a user
would pick for it (the first of its candidates this checkout has), its node
count and the log's own launch (nccl-tests' header `nGpus N` is
--gpus-per-process N): the predicted time against the out-of-place time at
every size. Prints per log the median and worst |error| at >= 64 KiB and
below, then per node count (one node, two nodes, more apart) the geomean
|error| over every size of every log: the geometric mean of |predicted / measured - 1| (each at least
0.1%, so an exact size does not zero the mean), the issue's measure.

    python benchmarks/model_error.py [--logs DIR ...] [--min-bytes N]

Rows of 0 bytes are skipped (no transfer). A log whose manifest note starts
"misconfigured:" (a run not set up as its vendor says, see the logs' README)
is marked * and pooled both with and without. Nothing here is fitted: the
machines are the repository's files with their defaults.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from msccl_py.errors import MscclError  # noqa: E402
from msccl_py.topologies import load  # noqa: E402
from msccl_py.tuning.logs import read_log  # noqa: E402
from msccl_py.tuning.nccl import simulate_nccl  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: log file -> (machine names, best first, nodes); the launch comes from the log's header
MACHINES = {
    "a100_all_reduce_gcm.txt": (("dgx-a100",), 1),
    "mi300x_all_reduce_rccl.txt": (("mi300x",), 1),
    "mi300x_all_reduce_rocm_blog.txt": (("mi300x",), 1),
    "v100_dgx1_all_reduce_old_layout.txt": (("dgx1",), 1),
    "oci_bm_gpu4_a100_1node_g8_all_reduce.txt": (("bm-gpu4", "ndv4"), 1),
    "oci_bm_gpu4_a100_2node_all_reduce.txt": (("bm-gpu4", "ndv4"), 2),
    "p4d_a100_2node_all_reduce_efa.txt": (("p4d", "p4de"), 2),
    "a3mega_h100_2node_all_reduce_tcpxo.txt": (("a3-mega",), 2),
    "oci_bm_gpu_h100_2node_all_reduce.txt": (("bm-gpu-h100", "dgx-h100"), 2),
    "oci_h200_2node_all_reduce.txt": (("bm-gpu-h200", "nd-h200-v5", "hgx-h200"), 2),
}
#: log file -> why its run is not the machine's normal setup (manifest notes "misconfigured: ...")
MISCONFIGURED: dict[str, str] = {}
SMALL = 64 << 10
_NGPUS = re.compile(r"nThread\s+\d+\s+nGpus\s+(\d+)")


def read_manifest(directory: str) -> None:
    """A log directory's ``manifest.tsv`` (file, machine, nodes) puts its machine first."""
    path = os.path.join(directory, "manifest.tsv")
    if not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(parts) < 3:
                continue
            if len(parts) > 3 and parts[3].startswith("misconfigured:"):
                MISCONFIGURED[parts[0]] = parts[3].split(":", 1)[1].strip()
            old = MACHINES.get(parts[0], ((), 1))[0]
            MACHINES[parts[0]] = ((parts[1],) + tuple(m for m in old if m != parts[1]),
                                  int(parts[2]))


def gpus_per_process(path: str) -> int:
    with open(path, errors="replace") as f:
        m = _NGPUS.search(f.read(4096))
    return int(m.group(1)) if m else 1


def machine_for(name: str, nodes: int) -> str | None:
    for cand in MACHINES.get(name, ((), 1))[0]:
        try:
            load(cand)
            return cand
        except MscclError:
            continue
    return None


def errors(path: str, min_bytes: int) -> tuple[str, int, int, list[tuple[int, float]]] | None:
    name = os.path.basename(path)
    if name not in MACHINES:
        return None
    nodes = MACHINES[name][1]
    machine = machine_for(name, nodes)
    if machine is None:
        return None
    log = read_log(path)
    rows = [r for r in log.rows if r.size >= max(1, min_bytes) and r.time_us > 0]
    g = gpus_per_process(path)
    pred = simulate_nccl(machine, log.collective or "allreduce", [r.size for r in rows],
                         nodes=nodes, gpus_per_process=g)
    return machine, nodes, g, [(r.size, p.time_us / r.time_us - 1) for r, p in zip(rows, pred)]


def geomean_abs(errs: list[float]) -> float:
    """Geometric mean of |error| (each floored at 0.1%)."""
    return math.exp(statistics.fmean(math.log(max(abs(e), 1e-3)) for e in errs)) if errs else 0.0


def collect(dirs: list[str], min_bytes: int = 1) -> list[tuple[str, tuple | None]]:
    """Every log of ``dirs`` (manifests read, first directory wins per name) with its
    :func:`errors` (None where this checkout has no machine for it), sorted by name."""
    seen: dict[str, str] = {}
    for d in dirs:
        read_manifest(d)
        for f in sorted(os.listdir(d)):
            if f.endswith(".txt"):
                seen.setdefault(f, os.path.join(d, f))
    return [(name, errors(path, min_bytes)) for name, path in sorted(seen.items())]


def pooled(found: list[tuple[str, tuple | None]], keep_misconfigured: bool = True
           ) -> dict[int, list[float]]:
    """Per node count, every size's error of every log (those marked misconfigured left
    out unless ``keep_misconfigured``)."""
    pools: dict[int, list[float]] = {1: [], 2: []}
    for name, got in found:
        if got is None or (not keep_misconfigured and name in MISCONFIGURED):
            continue
        pools.setdefault(got[1], []).extend(e for _, e in got[3])
    return pools


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", nargs="*", default=[], help="more directories of logs")
    ap.add_argument("--min-bytes", type=int, default=1)
    ap.add_argument("--rows", action="store_true", help="print every size's error")
    args = ap.parse_args()
    found = collect([os.path.join(HERE, "tests", "data", "nccl_tests")] + args.logs,
                    args.min_bytes)
    print(f"{'log':<44} {'machine':<12} {'n':>2} {'-g':>3} {'rows':>4}  "
          f"{'>=64KiB med / worst':>20}  {'<64KiB med / worst':>20}")
    for name, got in found:
        if got is None:
            print(f"{name:<44} (no machine file for it in this checkout)")
            continue
        machine, nodes, g, errs = got
        big = [abs(e) for s, e in errs if s >= SMALL]
        small = [abs(e) for s, e in errs if s < SMALL]

        def cell(xs):
            return (f"{statistics.median(xs) * 100:7.1f}% / {max(xs) * 100:6.1f}%" if xs
                    else f"{'-':>20}")
        mark = " *" if name in MISCONFIGURED else ""
        print(f"{name:<44} {machine:<12} {nodes:>2} {g:>3} {len(errs):>4}  {cell(big):>20}  "
              f"{cell(small):>20}{mark}")
        if args.rows:
            for s, e in errs:
                print(f"    {s:>12} {e * 100:+7.1f}%")
    pools, kept = pooled(found), pooled(found, keep_misconfigured=False)
    for nodes, errs in sorted(pools.items()):
        label = {1: "one node", 2: "two nodes"}.get(nodes, f"{nodes} nodes")
        print(f"pooled {label}: geomean |error| {geomean_abs(errs) * 100:.1f}% over "
              f"{len(errs)} sizes", end="")
        ok = kept.get(nodes, [])
        if len(ok) != len(errs):
            print(f"; without the runs marked *: {geomean_abs(ok) * 100:.1f}% over "
                  f"{len(ok)} sizes", end="")
        print()
    names = {name for name, _ in found}
    for name, why in sorted(MISCONFIGURED.items()):
        if name in names:
            print(f"* {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
