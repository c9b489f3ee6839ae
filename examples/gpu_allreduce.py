"""The communicator example's collectives on GPUs, with CuPy arrays.

Each call picks the same library program the CPU communicator would
(``msccl_py.library.select``), compiles it, and runs its XML on the CuPy
runtime: a persistent interpreter kernel in which every XML threadblock is
one CUDA block. With ``placement="one-gpu"`` (the default) all ranks share
the current GPU, so this runs on a single-GPU machine; ``placement="devices"``
puts rank r on GPU r.

Without CuPy or a GPU the script says why and exits with status 0 (install
CuPy with ``pip install -e ".[cuda12]"`` or ``".[cuda13]"``).

Run: ``python examples/gpu_allreduce.py [WORLD_SIZE]`` (default 4)
"""

import sys

import numpy as np

from msccl_py import library
from msccl_py.runtime import cupy as gpu

reason = gpu.available()          # None when CuPy imports and sees a GPU
if reason is not None:
    print(f"no GPU run: {reason}")
    print("(the same collectives run on CPU processes: python examples/communicator_cpu.py)")
    sys.exit(0)

import cupy as cp  # noqa: E402  (only importable where the check above passed)

world = int(sys.argv[1]) if len(sys.argv) > 1 else 4
count = 1 << 20                   # elements per rank: 4 MiB of float32


def collective(name: str, inputs: list, **select_args) -> list:
    """Run one collective over per-rank CuPy arrays; results stay on the GPU."""
    nbytes = inputs[0].nbytes
    sel = library.select(name, world, nbytes, **select_args)
    alg = sel.compile()
    print(f"{name:<10} {nbytes >> 10:>6} KiB/rank -> {sel.name} ({sel.protocol})")
    return gpu.run(alg, inputs, as_cupy=True)


rank_inputs = [cp.full(count, r + 1.0, dtype=cp.float32) for r in range(world)]
summed = collective("allreduce", rank_inputs)
want = world * (world + 1) / 2
print(f"  all_reduce: every element {want:g} on every rank: "
      f"{all(bool((out == want).all()) for out in summed)}")

blocks = [cp.arange(count // world, dtype=cp.float32) + r * count for r in range(world)]
gathered = collective("allgather", blocks)
expect = cp.concatenate(blocks)
print(f"  all_gather: concatenation in rank order on every rank: "
      f"{all(bool((out == expect).all()) for out in gathered)}")

mixed = [cp.arange(count, dtype=cp.float32) + r * count for r in range(world)]
exchanged = collective("alltoall", mixed)
k = count // world
ok = all(bool((exchanged[r][s * k:(s + 1) * k] == mixed[s][r * k:(r + 1) * k]).all())
         for r in range(world) for s in range(world))
print(f"  all_to_all: block r of rank s arrives at rank r: {ok}")

data = [cp.arange(count, dtype=cp.float32) if r == 0 else cp.zeros(count, cp.float32)
        for r in range(world)]
copies = collective("broadcast", data, root=0)
print(f"  broadcast:  rank 0's data on every rank: "
      f"{all(bool((out == data[0]).all()) for out in copies)}")
print("first elements per rank:", [float(np.asarray(cp.asnumpy(o[:1]))[0]) for o in summed])
