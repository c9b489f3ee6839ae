"""Reduce as a ring reduce-scatter followed by a gather to the root (Rabenseifner's reduce).

The data is cut into n blocks; a ring reduce-scatter (n-1 steps, in a
scratch copy so the input is never written) leaves rank j with block j
reduced, and every rank sends its block straight to the root (one step).
Each rank sends about one data size, so the root's links are not the
bottleneck: meant for large messages. Any rank count >= 2, any root.
"""

from msccl_py.library.prelude import *


@library_program(
    "reduce", "ring reduce-scatter, then every block straight to the root",
    params=(rooted.root_param("rank receiving the result"), patterns.RINGS),
    rank_check=rooted.root_check, spread="channels", protocols=("Simple", "LL128", "LL"),
    min_bytes=1 << 20, target_max_ranks=(("rccl", 63),))  # the root: a threadblock per peer
def reduce_rs_gather(n, root=0, channels=1):
    """Build the reduce-scatter + gather reduce (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``channels`` (rings of the reduce-scatter;
    default: the fewest that fit the target).

        python programs/reduce_rs_gather.py 8 --root 1 --protocol Simple
    """
    require_ranks("reduce-scatter + gather reduce", n)
    with program(Reduce(n, n, False, root)):
        work = patterns.work_buffer(n, n, inplace=False)
        patterns.ring_reduce_scatter(list(range(n)), work, lambda j: j, rings=channels)
        gather_ch = 2 * channels  # past every ring channel (a two-rank ring takes two each)
        for j in range(n):
            chunk(j, work, j).copy(root, Buffer.output, j, ch=gather_ch)


if __name__ == "__main__":
    sys.exit(reduce_rs_gather.main())
