#!/usr/bin/env python3
"""A DDP training step on the msccl backend and on gloo, side by side in one run.

    python benchmarks/ddp_step.py                    # 4 processes, ~10M parameters
    python benchmarks/ddp_step.py --ranks 4 --steps 12 --rounds 3

The script starts itself under torchrun. The model is an MLP of 8 linear
layers 1024 -> 1024 plus a 1024 -> 1024 head: 9 x (1024 x 1024 + 1024) =
9.45M float32 parameters, SGD, batch 16 a rank (small enough that the step is not
all arithmetic). Two DDP copies of the same
model run on the same data: one over the default ``msccl`` group, one over
a gloo group of the same ranks (``dist.new_group(backend="gloo")``). DDP's
buckets (25 MB) are all-reduced asynchronously, so their communication
overlaps with the rest of the backward pass on both backends.

Method: each step is ``barrier(); t0; forward, backward, optimizer step;
t1`` on every rank; a step's time is the slowest rank's; the table prints
the median over ``--steps`` steps after 2 warm-up steps, and ``--rounds``
alternates the two backends and keeps each one's best median. The two
copies' parameters are compared at the end (they must agree within rtol
1e-5, atol 1e-6).
"""

from __future__ import annotations

import argparse
import copy
import os
import time

from torch_backend import run_under_torchrun


def rank_main(args) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import msccl_py.torch  # noqa: F401
    dist.init_process_group("msccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    base = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, args.width))
    nparams = sum(p.numel() for p in base.parameters())
    models, opts = {}, {}
    for name, group in (("msccl", None), ("gloo", gloo)):
        models[name] = DDP(copy.deepcopy(base), process_group=group)
        opts[name] = torch.optim.SGD(models[name].parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(100 + rank)
    data = [(torch.randn(args.batch, args.width, generator=gen),
             torch.randn(args.batch, args.width, generator=gen)) for _ in range(4)]
    best: dict[str, float] = {}

    def step(name: str, k: int) -> None:
        x, y = data[k % len(data)]
        loss = torch.nn.functional.mse_loss(models[name](x), y)
        opts[name].zero_grad()
        loss.backward()
        opts[name].step()

    k = {"msccl": 0, "gloo": 0}
    for _round in range(args.rounds):
        for name, group in (("msccl", None), ("gloo", gloo)):
            times = []
            for i in range(2 + args.steps):
                dist.barrier(group=group)
                t0 = time.perf_counter()
                step(name, k[name])
                took = time.perf_counter() - t0
                k[name] += 1
                if i >= 2:
                    times.append(took)
            mine = torch.tensor(times, dtype=torch.float64)
            every = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(every, mine, group=gloo)
            med = float(np.median(torch.stack(every).max(dim=0).values.numpy()))
            best[name] = min(best.get(name, med), med)
    a, b = (dict(models[n].module.named_parameters()) for n in ("msccl", "gloo"))
    worst = max(float((a[p] - b[p]).detach().abs().max()) for p in a)
    same = all(torch.allclose(a[p], b[p], rtol=1e-5, atol=1e-6) for p in a)
    if rank == 0:
        m, g = best["msccl"], best["gloo"]
        print(f"DDP step, {world} processes, {nparams / 1e6:.2f}M float32 parameters, batch "
              f"{args.batch} a rank, SGD; median of the slowest rank over {args.steps} steps, "
              f"best of {args.rounds} round(s); load average {os.getloadavg()[0]:.1f}")
        print(f"  msccl {m * 1e3:.1f} ms   gloo {g * 1e3:.1f} ms   gloo / msccl {g / m:.2f}x")
        print(f"  parameters after {k['msccl']} steps each: largest difference {worst:.2g} "
              f"({'within' if same else 'NOT within'} rtol 1e-5, atol 1e-6)", flush=True)
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--port", type=int, default=29519)
    run_under_torchrun(__file__, ap.parse_args(), rank_main)


if __name__ == "__main__":
    main()
