"""One-shot allreduce: every rank sends its whole buffer to every other rank, then sums.

Each rank copies its buffer straight into a scratch slot on every peer and,
once the ``n-1`` arrivals are in, reduces them into its own copy. A single
communication step and one wait per rank, where all-pairs needs two
(reduce-scatter, then allgather): it trades ``n-1`` times the traffic of a
reduce-scatter for half the synchronisation. Meant for the smallest messages
(up to 8 KiB per rank, LL), where a call's cost is the waits, not the bytes;
fully connected machines. Any rank count >= 2.
"""

from msccl_py.library.prelude import *


# the n-1 local reductions share one threadblock, each after a dependency nop: 2(n-1)
# steps of the newer runtimes' 64; MSCCL fuses runs of them into reductions of at most
# 16 sources, which holds up to 49 ranks
@library_program(
    "allreduce", "one-shot: every rank sends its buffer to all peers and sums locally, 1 step",
    params=(patterns.INPLACE["allreduce"],), protocols=("LL", "LL128", "Simple"),
    max_bytes=8 << 10, target_max_ranks=(("msccl-executor", 33), ("rccl", 33), ("msccl", 49)))
def allreduce_oneshot(n, inplace=True):
    """Build the one-shot allreduce program (returns the finished MSCCLProgram).

    Parameters: ``inplace`` (default true; out of place sums into the output and
    never writes the input).

        python programs/allreduce_oneshot.py 8 --protocol LL
    """
    require_ranks("one-shot allreduce", n)
    with program(AllReduce(n, 1, inplace)):
        for src in range(n):
            for dst in range(n):
                if dst != src:
                    # slot of src on dst: peers in rank order, dst itself skipped
                    chunk(src, Buffer.input, 0).copy(dst, "oneshot", src - (src > dst))
        for r in range(n):
            acc = chunk(r, Buffer.input, 0)
            if not inplace:
                acc = acc.copy(r, Buffer.output, 0)
            for slot in range(n - 1):
                acc = acc.reduce(chunk(r, "oneshot", slot))


if __name__ == "__main__":
    sys.exit(allreduce_oneshot.main())
