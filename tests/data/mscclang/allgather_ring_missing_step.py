"""A 4-rank ring allgather with one hop left out: rank 1 never gets rank 2's chunk."""
from msccl_py.language import *
from msccl_py.language.collectives import AllGather
from msccl_py.topologies import fully_connected

n = 4
with MSCCLProgram("ring_ag_missing", fully_connected(n), AllGather(n, 1, False), 1):
    for r in range(n):
        c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
        for step in range(n - 1):
            if (r, step) != (2, 2):  # the missing hop
                c = c.copy((c.rank + 1) % n, Buffer.output, r)
    Check()
    XML()
