"""The seed library's own test functions, run on msccl_py.mpi.

The seed (``../shared/seeds/nccl_in_500_locs_mpi.txt``) is a script whose
test functions call its library by bare names (``init_env``, ``gather``,
``all_reduce``, ...). This example reads the seed's code at run time, leaves
out its ``__main__`` block, binds those names to :mod:`msccl_py.mpi` (what
changing the seed's import does) and runs every ``test_*`` function with
``mpi_frame``, one process per rank, as the seed's ``__main__`` does. Each
rank prints its data before and after the call.

Without ``../shared`` it runs the same eight scenarios written here and
prints each rank's result.

    python examples/seed_mpi.py [WORLD_SIZE]      # default 4
"""

import sys
from pathlib import Path

from msccl_py import mpi

SEED = Path(__file__).resolve().parents[1].parent / "shared" / "seeds" / \
    "nccl_in_500_locs_mpi.txt"


def seed_tests() -> dict:
    """The seed's test functions, their library names bound to msccl_py.mpi."""
    text = SEED.read_text()
    code = text[text.index("#!/usr/bin/env python3"):]
    code = code[:code.index('if __name__ == "__main__":')]
    namespace = {"__name__": "seed_tests"}
    exec(compile(code, str(SEED), "exec"), namespace)
    namespace.update({name: getattr(mpi, name) for name in mpi.__all__})   # the new import
    return {name: fn for name, fn in namespace.items() if name.startswith("test_")}


def scenarios(rank, world_size, shared_mem, pipe_pairs):
    """The seed's eight scenarios in one function: (name, this rank's result) pairs."""
    mpi.init_env(rank, world_size, shared_mem, pipe_pairs)
    mpi.barrier()
    n = world_size
    four = [rank * 10 + i for i in range(4)]
    two_per_rank = [rank * 10 + i for i in range(2 * n)]
    tens = [10 * i for i in range(n)]
    return [
        ("gather", mpi.gather(four)),
        ("scatter", mpi.scatter(tens if rank == 0 else None, source_rank=0)),
        ("broadcast", mpi.broadcast(tens if rank == 1 else None, source_rank=1)),
        ("all_to_all", mpi.all_to_all(two_per_rank)),
        ("all_gather", mpi.all_gather(four)),
        ("reduce_scatter", mpi.reduce_scatter(two_per_rank, op="sum", slice=True)),
        ("all_reduce", mpi.all_reduce(two_per_rank, op="mean")),
        ("reduce", mpi.reduce(two_per_rank, target_rank=0, op="sum")),
    ]


def main() -> None:
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    if SEED.is_file():
        for name, test in seed_tests().items():
            print(f"== seed's {name}, {world_size} ranks on msccl_py.mpi", flush=True)
            mpi.mpi_frame(test, world_size=world_size)
        return
    print("(no ../shared seed here; running the same scenarios written in this example)")
    per_rank = mpi.mpi_frame(scenarios, world_size=world_size)
    for i, (name, _) in enumerate(per_rank[0]):
        print(f"== {name}, {world_size} ranks on msccl_py.mpi")
        for rank, results in enumerate(per_rank):
            print(f"Rank {rank} data: {results[i][1]}")


if __name__ == "__main__":
    main()
