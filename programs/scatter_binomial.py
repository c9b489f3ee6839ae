"""Binomial-tree scatter from any root, any rank count.

The mirror of gather_binomial: the root sends each child the blocks of its
whole subtree (contiguous in relative rank order; a subtree that wraps past
the last rank is sent as two pieces), and every inner rank keeps its own
block and forwards the rest, largest subtree first. ceil(log2 n) steps:
for many ranks and small blocks.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/scatter_binomial.py 8 --root 5 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Scatter
from msccl_py.library import patterns, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def scatter_binomial(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the binomial-tree scatter (returns the finished MSCCLProgram).

    >>> scatter_binomial(8).check()
    True
    """
    patterns.require_ranks("binomial scatter", num_ranks)
    n, c = num_ranks, chunks
    with MSCCLProgram("scatter_binomial", fully_connected(n), Scatter(n, c, False, root),
                      instances, protocol=protocol) as prog:
        def absolute(v):
            return (v + root) % n
        rounds = patterns.binomial_rounds(n)
        inner = {parent for pairs in rounds for parent, _ in pairs} - {0}
        chunk(root, Buffer.input, root * c, c).copy(root, Buffer.output, 0)
        distance = 1 << (len(rounds) - 1) if rounds else 1
        for pairs in reversed(rounds):
            for parent, child in pairs:
                span = patterns.subtree_span(n, child, distance)
                dst, at = ("scatter", 0) if child in inner else (Buffer.output, 0)
                if parent != 0:
                    chunk(absolute(parent), "scatter", (child - parent) * c, span * c).copy(
                        absolute(child), dst, at)
                    continue
                first = absolute(child)
                head = min(span, n - first)
                chunk(root, Buffer.input, first * c, head * c).copy(absolute(child), dst, at)
                if head < span:
                    chunk(root, Buffer.input, 0, (span - head) * c).copy(
                        absolute(child), dst, at + head * c)
            distance //= 2
        for v in inner:
            chunk(absolute(v), "scatter", 0, c).copy(absolute(v), Buffer.output, 0)
    return prog


def _root_ok(num_ranks, values):
    if not 0 <= values["root"] < num_ranks:
        return f"root {values['root']} is not a rank of {num_ranks}"
    return None


SPEC = ProgramSpec(
    "scatter_binomial", "scatter", "binomial tree, ceil(log2 n) steps, any root",
    build="scatter_binomial",
    params=(Param("root", int, 0, "scattering rank", low=0),
            Param("chunks", int, 1, "chunks per rank", low=1, high=16)),
    rank_check=_root_ok, protocols=("LL", "LL128", "Simple"), max_bytes=64 << 10)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, scatter_binomial))
