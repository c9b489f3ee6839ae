"""DDP training on CPU with the msccl backend: a small MLP, plain SGD, under torchrun.

    torchrun --nproc-per-node 4 examples/ddp_train.py --backend msccl --out params.pt

Every rank trains on its own slice of a fixed synthetic regression set; DDP
averages the gradients with ``all_reduce`` on the chosen backend (``msccl``
or ``gloo``), so both backends end with the same parameters up to float32
rounding. Rank 0 prints the loss every 10 steps and saves the final
parameters with ``--out``.

Run without torchrun (``python examples/ddp_train.py``, no ``RANK`` set), it
starts torchrun itself with ``--nproc-per-node 4`` (``--nproc N`` to change).
Without torch it says how to install the CPU build and exits 0.
"""

import argparse
import os
import subprocess
import sys

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ModuleNotFoundError as exc:
    print(f"no run: this example needs torch ({exc}); install the CPU build: "
          f"pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    sys.exit(0)

import msccl_py.torch  # noqa: F401,E402  (registers the "msccl" backend)


def self_launch(argv: list[str]) -> int:
    """Not under torchrun (no RANK): run this script under torchrun, one host, N ranks."""
    nproc = "4"
    if "--nproc" in argv:
        i = argv.index("--nproc")
        nproc, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    print(f"no RANK set: starting torchrun --standalone --nproc-per-node {nproc}", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    return subprocess.call([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            f"--nproc-per-node={nproc}", os.path.abspath(__file__), *argv],
                           env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="msccl", help="msccl (default) or gloo")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", default=None, help="save the final parameters here (rank 0)")
    args = ap.parse_args()

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64 * world, 32, generator=gen)
    y = x[:, :4].sum(dim=1, keepdim=True) - x[:, 4:8].prod(dim=1, keepdim=True)
    mine = slice(rank * 64, (rank + 1) * 64)
    for step in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[mine]), y[mine])
        loss.backward()
        opt.step()
        if rank == 0 and (step + 1) % 10 == 0:
            print(f"step {step + 1}: loss {loss.item():.5f}", flush=True)
    if rank == 0 and args.out:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" not in os.environ:
        sys.exit(self_launch(sys.argv[1:]))
    main()
