#!/usr/bin/env python3
"""Time msccl_py.init() communicators across "hosts" on one machine: programs and engines.

Run it as every rank of a launch, with ``MSCCL_PY_HOST`` per rank; rank 0
prints the table. For each size (bytes per rank) and each program choice it
times ``all_reduce`` (``--collective``):

* ``layout``: the communicator's own selector, which knows the hosts
  (hierarchical programs from 1 MiB);
* ``flat``: the library's choice for one host of the same rank count;
* any ``--programs NAME`` forced (a hierarchical one gets ``gpus_per_node``).

Method: warm-up calls, then every repetition is ``barrier(); t0; call; t1``;
a repetition's time is the slowest rank's (an all_reduce of the times, MAX);
the median is shown with the bytes each call sent between hosts.

    mpirun -np 4 sh -c 'MSCCL_PY_HOST=h$((OMPI_COMM_WORLD_RANK/2)) exec python \\
        benchmarks/launch_hosts.py --sizes 64KiB 1MiB 16MiB'
    # torchrun: two invocations, --nnodes 2 --node_rank i, MSCCL_PY_HOST=node$i
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import msccl_py
from msccl_py.comm.selector import Pick, Selector
from msccl_py.plan.sizes import format_size, parse_size

OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "alltoall": "all_to_all"}


class Forced(Selector):
    """The library's program ``name`` for every call of its collective."""

    def __init__(self, world_size: int, layout, name: str):
        super().__init__(world_size, layout, use_environment=False)
        self.name = name

    def __call__(self, collective, nbytes, root=0, itemsize=4, inplace=False) -> Pick:
        from msccl_py import library
        spec = library.get(self.name)
        params = {"gpus_per_node": self.layout.gpus_per_node} if spec.hierarchical else {}
        sel = library.Selection(self.name, self.world_size, 1, "Simple", params)
        return Pick((self.name, nbytes > 0), self.name, params, "forced", sel.compile)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["64KiB", "1MiB", "16MiB"])
    ap.add_argument("--collective", choices=tuple(OPS), default="allreduce")
    ap.add_argument("--programs", nargs="*", default=[])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    comm = msccl_py.init()
    n, lay = comm.world_size, comm.layout
    choices = [("layout", comm.selector), ("flat", Selector(n, None, use_environment=False))]
    choices += [(p, Forced(n, lay, p)) for p in args.programs]
    from msccl_py.runtime.communicator import Communicator
    # one communicator per choice over the same rank runtime: each keeps its own program cache
    comms = [(label, Communicator(comm._rt, "library-only", selector=sel))
             for label, sel in choices]
    rows = []
    for size in args.sizes:
        nbytes = parse_size(size)
        count = nbytes // 4 if args.collective != "allgather" else nbytes // 4 // n
        x = np.ones(count, dtype=np.float32)
        for label, c in comms:
            call = getattr(c, OPS[args.collective])
            for _ in range(args.warmup):
                call(x)
            before = comm.transport_stats()["bytes"]
            times = []
            for _ in range(args.iters):
                comm.barrier()
                t0 = time.perf_counter()
                call(x)
                times.append(time.perf_counter() - t0)
            sent = (comm.transport_stats()["bytes"] - before) // args.iters
            slow = comm.all_reduce(np.array(times), op="max")
            crossed = int(comm.all_reduce(np.array([sent], dtype=np.int64))[0])
            name = c.program(args.collective, x.nbytes).name
            rows.append((size, label, name, statistics.median(slow.tolist()), crossed))
    if comm.rank == 0:
        print(f"{args.collective}, {lay.describe()}, engine {comm.transports[-1]}, "
              f"median of {args.iters} (slowest rank)")
        print(f"{'size':>8}  {'choice':<24} {'program':<32} {'ms':>9}  {'between hosts':>14}")
        for size, label, name, t, crossed in rows:
            print(f"{size:>8}  {label:<24} {name:<32} {t * 1e3:9.3f}  "
                  f"{format_size(crossed):>14}")
    comm.close()


if __name__ == "__main__":
    main()
