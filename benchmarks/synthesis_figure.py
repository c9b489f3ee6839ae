"""Draw a synthesized allgather's trees on its machine (the picture in docs/synthesis.md).

    python benchmarks/synthesis_figure.py [--topology mi250] [--out docs/synthesis-mi250.png]

Left: the machine's links, line width by bandwidth. Right, one panel per
root shown: the trees that carry that root's chunks, one colour per tree,
labelled with how many of the root's chunks each carries. Needs matplotlib
and HiGHS (``pip install -e ".[plot,synth]"``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from msccl_py.synthesis import synthesize
from msccl_py.topologies import load

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topology", default="mi250")
    p.add_argument("--roots", type=int, nargs="+", default=[0, 1])
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" /
                                        "synthesis-mi250.png"))
    args = p.parse_args(argv)
    from matplotlib.figure import Figure
    topo = load(args.topology)
    s = synthesize(args.topology, "allgather")
    n = topo.num_nodes()   # ranks on a circle: no link passes through another rank
    pos = {r: (math.sin(2 * math.pi * r / n), math.cos(2 * math.pi * r / n)) for r in range(n)}
    fig = Figure(figsize=(3.8 * (1 + len(args.roots)), 4.4))
    axes = fig.subplots(1, 1 + len(args.roots))
    g = topo.graph
    top = max(d["bw"] for u, v, d in g.edges(data=True) if isinstance(u, int))
    for ax in axes:
        for u, v, d in g.edges(data=True):
            if isinstance(u, int) and isinstance(v, int) and u < v:
                (x1, y1), (x2, y2) = pos[u], pos[v]
                ax.plot([x1, x2], [y1, y2], color="#bbbbbb", lw=1 + 5 * d["bw"] / top, zorder=1)
        for r in range(topo.num_nodes()):
            x, y = pos[r]
            ax.scatter([x], [y], s=380, color="#d9ead3", edgecolors="black", zorder=3)
            ax.text(x, y, str(r), ha="center", va="center", fontsize=10, zorder=4)
        ax.set_axis_off()
        ax.set_aspect("equal")
    axes[0].set_title(f"{topo.title}\nlink width: bandwidth", fontsize=9)
    chunks = s.chosen.schedule.chunks
    for ax, root in zip(axes[1:], args.roots):
        trees: dict = {}
        for f in s.chosen.schedule.flows:
            if f.tree.root == root:
                trees[f.tree.parent] = trees.get(f.tree.parent, 0) + len(f.chunks)
        for k, (parent, count) in enumerate(sorted(trees.items(), key=lambda t: -t[1])):
            color = COLORS[k % len(COLORS)]
            off = (k - (len(trees) - 1) / 2) * 0.05
            for v, u in enumerate(parent):
                if u < 0:
                    continue
                (x1, y1), (x2, y2) = pos[u], pos[v]
                ax.annotate("", xy=(x2 + off, y2 + off), xytext=(x1 + off, y1 + off),
                            arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6,
                                            shrinkA=10, shrinkB=10), zorder=2)
            ax.plot([], [], color=color, label=f"{count} of {chunks} chunks")
        ax.legend(loc="upper center", fontsize=7, ncol=2, bbox_to_anchor=(0.5, 0.0))
        ax.set_title(f"trees of rank {root}'s data", fontsize=9)
    fig.suptitle(f"synthesized allgather on {topo.name}: {s.algbw_GBps:.0f} GB/s algbw at 1 GiB, "
                 f"{s.algbw_GBps / s.bound.algbw_GBps:.0%} of the bound "
                 f"({s.bound.algbw_GBps:.0f})", fontsize=10)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
