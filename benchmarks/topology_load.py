"""Time loading a 1,024-GPU (128-node) topology file.

Two files, written to a temporary directory:

* ``cluster``: a DGX H100-like machine (NVSwitch, 8 NICs) and a cluster block
  of 128 copies (the way real clusters are described);
* ``flat``: one machine of 1,024 GPUs spelled out statement by statement
  (128 switch groups, 1,024 NICs, 2,048 ring links), to time the parser on
  a large file.

Each run parses from scratch (cache cleared) and materialises the full
``links`` matrix (1,024 x 1,024), which is what the compiler reads.
Prints the median of several runs; the target is under 2 s.

    python benchmarks/topology_load.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from msccl_py.topologies import library

MACHINE = """
machine node8 {
  gpus 8
  linktype nvlink4 25 GB/s
  switch nvswitch gpus 0-7 port nvlink4 x18
%s
}
"""


def cluster_text(nodes: int) -> str:
    nics = "\n".join(f"  nic ib{i} 400 Gb/s gpus {i}" for i in range(8))
    return MACHINE % nics + f"cluster big {{\n  machine node8\n  nodes {nodes}\n}}\n"


def flat_text(nodes: int) -> str:
    n = nodes * 8
    lines = ["machine big {", f"  gpus {n}", "  linktype nvlink4 25 GB/s", "  linktype ib 50 GB/s"]
    for k in range(nodes):
        lines.append(f"  switch sw{k} gpus {8 * k}-{8 * k + 7} port nvlink4 x18")
    for k in range(nodes):
        a, b = 8 * k + 7, (8 * k + 8) % n
        lines.append(f"  link {a} <-> {b} ib")
    for r in range(n):
        lines.append(f"  nic ib{r} 400 Gb/s gpus {r}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def measure(path: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        library.clear_cache()
        start = time.perf_counter()
        topo = library.load(path)
        links = topo.links
        times.append(time.perf_counter() - start)
    assert len(links) == 1024, len(links)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind, text in (("cluster", cluster_text(128)), ("flat", flat_text(128))):
            path = Path(tmp) / f"{kind}.topo"
            path.write_text(text)
            times = measure(path, args.runs)
            print(f"{kind:8s} 1024 GPUs / 128 nodes, {len(text.splitlines()):5d} lines: "
                  f"median {statistics.median(times):.3f} s "
                  f"(min {min(times):.3f}, max {max(times):.3f}, {args.runs} runs)")


if __name__ == "__main__":
    main()
