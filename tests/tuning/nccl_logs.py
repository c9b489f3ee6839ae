"""Synthetic nccl-tests output: a ring's α-β times printed the way nccl-tests prints them."""

from __future__ import annotations

import numpy as np

from msccl_py.tuning.logs import bus_factor

HEADER = """# Collective test starting: {binary}
# nThread 1 nGpus 1 minBytes 1024 maxBytes 4294967296 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
{ranks}#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""


def _num(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals, fewer when the width is exceeded."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return "%*.1e" % (width, value)


def ring_log(collective: str, nranks: int, alpha_us: float, link_GBps: float, share: float,
             efficiency: float = 1.0, base_us: float = 0.0, noise: float = 0.0, seed: int = 0,
             sizes=None, env: str = "") -> str:
    """nccl-tests text for a ring whose time is base + hops·α + S·busfactor/(share·β·e)."""
    rng = np.random.default_rng(seed)
    hops = 2 * (nranks - 1) if collective == "allreduce" else nranks - 1
    factor = bus_factor(collective, nranks)
    sizes = sizes or [1 << k for k in range(10, 33)]
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on   node01 device {r:2d} "
                    f"[0x{r:02x}] Synthetic GPU\n" for r in range(nranks))
    binary = {"allreduce": "all_reduce_perf", "allgather": "all_gather_perf",
              "reduce_scatter": "reduce_scatter_perf"}[collective]
    lines = [env, HEADER.format(ranks=ranks, binary=binary)]
    for size in sizes:
        t = base_us + hops * alpha_us + size * factor / (share * link_GBps * efficiency * 1e3)
        t *= 1 + noise * rng.uniform(-1, 1)
        algbw = size / t / 1e3
        cells = [f"{size:12d}", f"{size // 4:14d}", f"{'float':>9}", f"{'sum':>7}", f"{-1:7d}"]
        for _ in range(2):
            cells += [_num(t, 7), _num(algbw, 6), _num(algbw * factor, 6), f"{0:6d}"]
        lines.append("  ".join(cells))
    lines.append("# Out of bounds values : 0 OK\n#\n")
    return "\n".join(lines)
