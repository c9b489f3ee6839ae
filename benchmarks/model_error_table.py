"""The performance model's error on every published nccl-tests / rccl-tests log in tests/data.

For each log of ``tests/data/nccl_tests/manifest.tsv`` (file, machine file a
user would pick, node count) it predicts every size with ``simulate nccl``
(:func:`msccl_py.tuning.nccl_sim.simulate_nccl`: NCCL's or RCCL's own choice
per size, the log's GPUs per process from its header) and compares the
out-of-place time. It prints one markdown row per log (median and worst
|error| at >= 64 KiB and below) and the pooled geomean |error| for one node
and two nodes, the table docs/performance-model.md quotes.

    python benchmarks/model_error_table.py [--json]

No timing: the figures are the model's errors, the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from msccl_py.tuning.logs import read_log  # noqa: E402
from msccl_py.tuning.nccl_sim import simulate_nccl  # noqa: E402

DATA = REPO / "tests" / "data" / "nccl_tests"
SPLIT = 1 << 16     # 64 KiB


def manifest(path: Path = DATA / "manifest.tsv") -> list[tuple[str, str, int]]:
    """(log file, topology, nodes) per line of the manifest."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, topology, nodes, *_ = line.split("\t")
            out.append((name, topology, int(nodes)))
    return out


def log_errors(name: str, topology: str, nodes: int) -> dict:
    """Per-size relative errors (model - measured) / measured of one log."""
    log = read_log(DATA / name)
    rows = [r for r in log.rows if r.size > 0]
    g = log.gpus_per_process or 1
    results = simulate_nccl(topology, log.collective or "allreduce", [r.size for r in rows],
                            nodes=nodes, gpus_per_process=g, protocol=log.proto)
    errors = [(r.size, (res.time_us - r.time_us) / r.time_us, res.algorithm, res.protocol)
              for r, res in zip(rows, results)]
    return {"log": name, "topology": topology, "nodes": nodes, "gpus_per_process": g,
            "errors": errors}


def _stats(values: list[float]) -> tuple[float | None, float | None]:
    a = [abs(v) for v in values]
    return (statistics.median(a), max(a)) if a else (None, None)


def geomean(values: list[float]) -> float:
    """Geometric mean of |error| (each floored at 0.1% so an exact hit does not zero it)."""
    a = [max(abs(v), 1e-3) for v in values]
    return math.exp(sum(math.log(v) for v in a) / len(a)) if a else float("nan")


def table(results: list[dict]) -> str:
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"
    lines = ["| log | machine | nodes | -g | sizes | median >= 64 KiB | worst >= 64 KiB | "
             "median < 64 KiB | worst < 64 KiB |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        big = [e for s, e, *_ in r["errors"] if s >= SPLIT]
        small = [e for s, e, *_ in r["errors"] if s < SPLIT]
        (mb, wb), (ms, ws) = _stats(big), _stats(small)
        lines.append(f"| `{r['log']}` | {r['topology']} | {r['nodes']} | {r['gpus_per_process']} "
                     f"| {len(r['errors'])} | {pct(mb)} | {pct(wb)} | {pct(ms)} | {pct(ws)} |")
    lines.append("")
    for nodes, label in ((1, "one node"), (2, "two nodes")):
        errs = [e for r in results if r["nodes"] == nodes for _, e, *_ in r["errors"]]
        logs = sum(r["nodes"] == nodes for r in results)
        lines.append(f"Pooled geomean |error|, {label}: {100 * geomean(errs):.1f}% "
                     f"({len(errs)} sizes of {logs} logs)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print the per-size errors as JSON")
    args = p.parse_args(argv)
    results = [log_errors(*entry) for entry in manifest()]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
