"""Binomial-tree gather onto any root, any rank count.

Ranks are renumbered relative to the root. In round k the rank 2^k above a
multiple of 2^(k+1) forwards everything its subtree has collected (up to
2^k blocks, kept contiguous in relative order in scratch) to its parent;
the root places arrivals at their absolute positions (a subtree that wraps
past the last rank is sent as two pieces). ceil(log2 n) steps and
n-1 root receives in log2 n messages: for many ranks and small blocks.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/gather_binomial.py 8 --root 5 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Gather
from msccl_py.library import patterns, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def gather_binomial(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the binomial-tree gather (returns the finished MSCCLProgram).

    >>> gather_binomial(8).check()
    True
    """
    patterns.require_ranks("binomial gather", num_ranks)
    n, c = num_ranks, chunks
    with MSCCLProgram("gather_binomial", fully_connected(n), Gather(n, c, False, root),
                      instances, protocol=protocol) as prog:
        def absolute(v):
            return (v + root) % n
        rounds = patterns.binomial_rounds(n)
        inner = {parent for pairs in rounds for parent, _ in pairs} - {0}
        for v in inner:
            chunk(absolute(v), Buffer.input, 0, c).copy(absolute(v), "gather", 0)
        chunk(root, Buffer.input, 0, c).copy(root, Buffer.output, root * c)
        distance = 1
        for pairs in rounds:
            for parent, child in pairs:
                span = patterns.subtree_span(n, child, distance)
                src = "gather" if child in inner else Buffer.input
                if parent != 0:
                    chunk(absolute(child), src, 0, span * c).copy(
                        absolute(parent), "gather", (child - parent) * c)
                    continue
                first = absolute(child)
                head = min(span, n - first)
                chunk(absolute(child), src, 0, head * c).copy(root, Buffer.output, first * c)
                if head < span:
                    chunk(absolute(child), src, head * c, (span - head) * c).copy(
                        root, Buffer.output, 0)
            distance *= 2
    return prog


def _root_ok(num_ranks, values):
    if not 0 <= values["root"] < num_ranks:
        return f"root {values['root']} is not a rank of {num_ranks}"
    return None


SPEC = ProgramSpec(
    "gather_binomial", "gather", "binomial tree, ceil(log2 n) steps, any root",
    build="gather_binomial",
    params=(Param("root", int, 0, "gathering rank", low=0),
            Param("chunks", int, 1, "chunks per rank", low=1, high=16)),
    rank_check=_root_ok, protocols=("LL", "LL128", "Simple"), max_bytes=64 << 10,
    min_ranks=2)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, gather_binomial))
