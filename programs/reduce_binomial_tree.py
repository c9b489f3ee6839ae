"""Binomial-tree reduce onto any root, any rank count.

Ranks are renumbered relative to the root; in round k the rank 2^k
positions above a multiple of 2^(k+1) sends its partial sum down to it.
Inner ranks accumulate in scratch (the input is never written); ranks
without children send their input directly. ceil(log2 n) steps; ``chunks``
pipelines. Meant for small messages.
"""

from msccl_py.library.prelude import *


@library_program(
    "reduce", "binomial tree, ceil(log2 n) steps, any root", min_ranks=1,
    params=(rooted.root_param("rank receiving the result"), rooted.PIECES),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"), max_bytes=1 << 20)
def reduce_binomial_tree(n, root=0, chunks=1):
    """Build the binomial-tree reduce (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (default 1).

        python programs/reduce_binomial_tree.py 8 --root 2 --protocol LL
    """
    require_ranks("binomial-tree reduce", n, minimum=1)
    with program(Reduce(n, chunks, False, root)):
        absolute = rooted.absolute(n, root)
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


if __name__ == "__main__":
    sys.exit(reduce_binomial_tree.main())
