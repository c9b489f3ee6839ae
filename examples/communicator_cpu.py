"""Collectives between CPU processes with the communicator API.

``msccl_py.launch(fn, world_size, backend="shm")`` starts ``world_size`` OS
processes, calls ``fn(comm)`` in each and returns their results in rank
order. Each collective picks an algorithm from the library (``msccl-py
list``) for its collective, rank count and size, compiles it once, and runs
its MSCCL XML on the shared-memory runtime. The script prints each rank's
results and which library program ran each call, so you can see which
algorithm is really being used.

Run: ``python examples/communicator_cpu.py [WORLD_SIZE]`` (default 4)
"""

import sys

import numpy as np

import msccl_py


def work(comm):
    """Runs in every rank process; returns (name, result, program used) per call."""
    r, n = comm.rank, comm.world_size
    calls = []

    def record(name, collective, x, result):
        # comm.program() answers from the communicator's cache: the program this call ran.
        prog, _ = comm.program(collective, x.nbytes)
        calls.append((name, result.tolist(), prog.name))

    x = np.full(4, r + 1.0)                                  # every rank: r+1
    record("all_reduce", "allreduce", x, comm.all_reduce(x))
    x = np.array([10 * r, 10 * r + 1], dtype=np.int32)       # concatenated in rank order
    record("all_gather", "allgather", x, comm.all_gather(x))
    x = np.arange(n, dtype=np.int64) + 100 * r               # block j goes to rank j
    record("all_to_all", "alltoall", x, comm.all_to_all(x))
    x = np.array([7.0, 8.0, 9.0])                            # rank 0's data for everyone
    record("broadcast", "broadcast", x, comm.broadcast(x if r == 0 else None, root=0))
    return calls, dict(comm.fallbacks)


if __name__ == "__main__":      # needed when processes are spawned rather than forked
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    results = msccl_py.launch(work, world, backend="shm")
    for r, (calls, fallbacks) in enumerate(results):
        print(f"rank {r}:")
        for name, value, program in calls:
            print(f"  {name:<10} {value}   [{program}]")
        if fallbacks:            # the library had no program for a call: a built-in one ran
            print(f"  fallbacks: {fallbacks}")
    total = world * (world + 1) / 2
    ok = all(calls[0][1] == [total] * 4 for calls, _ in results)
    print(f"all_reduce gives {total:g} on every rank: {ok}")
