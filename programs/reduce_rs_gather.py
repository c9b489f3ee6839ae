"""Reduce as a ring reduce-scatter followed by a gather to the root (Rabenseifner's reduce).

The data is cut into n blocks; a ring reduce-scatter (n-1 steps, in a
scratch copy so the input is never written) leaves rank j with block j
reduced, and every rank sends its block straight to the root (one step).
Each rank sends about one data size, so the root's links are not the
bottleneck: meant for large messages. Any rank count >= 2, any root.

Parameters: ``root`` (default 0), ``channels`` (rings of the reduce-scatter;
default: the fewest that fit the target).

    python programs/reduce_rs_gather.py 8 --root 1 --protocol Simple
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Reduce
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def reduce_rs_gather(num_ranks, instances=1, protocol="Simple", root=0, channels=1):
    """Build the reduce-scatter + gather reduce (returns the finished MSCCLProgram).

    >>> reduce_rs_gather(8).check()
    True
    """
    patterns.require_ranks("reduce-scatter + gather reduce", num_ranks)
    n = num_ranks
    with MSCCLProgram("reduce_rs_gather", fully_connected(n), Reduce(n, n, False, root),
                      instances, protocol=protocol) as prog:
        work = patterns.work_buffer(n, n, inplace=False)
        patterns.ring_reduce_scatter(list(range(n)), work, lambda j: j, rings=channels)
        gather_ch = 2 * channels  # past every ring channel (a two-rank ring takes two each)
        for j in range(n):
            chunk(j, work, j).copy(root, Buffer.output, j, ch=gather_ch)
    return prog


SPEC = ProgramSpec(
    "reduce_rs_gather", "reduce", "ring reduce-scatter, then every block straight to the root",
    build="reduce_rs_gather",
    params=(rooted.root_param("rank receiving the result"), patterns.RINGS),
    rank_check=rooted.root_check, spread="channels", protocols=("Simple", "LL128", "LL"),
    min_bytes=1 << 20, target_max_ranks=(("rccl", 63),))  # the root: a threadblock per peer

if __name__ == "__main__":
    sys.exit(script.main(SPEC, reduce_rs_gather))
