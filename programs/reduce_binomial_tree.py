"""Binomial-tree reduce onto any root, any rank count.

Ranks are renumbered relative to the root; in round k the rank 2^k
positions above a multiple of 2^(k+1) sends its partial sum down to it.
Inner ranks accumulate in scratch (the input is never written); ranks
without children send their input directly. ceil(log2 n) steps; ``chunks``
pipelines. Meant for small messages.

Parameters: ``root`` (default 0), ``chunks`` (default 1).

    python programs/reduce_binomial_tree.py 8 --root 2 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Reduce
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def reduce_binomial_tree(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the binomial-tree reduce (returns the finished MSCCLProgram).

    >>> reduce_binomial_tree(8).check()
    True
    """
    patterns.require_ranks("binomial-tree reduce", num_ranks, minimum=1)
    n = num_ranks
    with MSCCLProgram("reduce_binomial_tree", fully_connected(n), Reduce(n, chunks, False, root),
                      instances, protocol=protocol) as prog:
        def absolute(v):
            return (v + root) % n
        rounds = patterns.binomial_rounds(n)
        parents = {parent for pairs in rounds for parent, _ in pairs}
        # where each relative rank accumulates: the root's output, else scratch
        acc = {v: (Buffer.output if v == 0 else "acc") for v in parents | {0}}
        for v in parents | {0}:
            chunk(absolute(v), Buffer.input, 0, chunks).copy(absolute(v), acc[v], 0)
        for pairs in rounds:
            for parent, child in pairs:
                src = acc.get(child, Buffer.input)
                for k in range(chunks):
                    chunk(absolute(parent), acc[parent], k).reduce(
                        chunk(absolute(child), src, k))
    return prog


SPEC = ProgramSpec(
    "reduce_binomial_tree", "reduce", "binomial tree, ceil(log2 n) steps, any root",
    build="reduce_binomial_tree", min_ranks=1,
    params=(rooted.root_param("rank receiving the result"),
            Param("chunks", int, 1, "pipelined pieces", low=1, high=16)),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, reduce_binomial_tree))
