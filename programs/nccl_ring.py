"""NCCL's ring algorithms, built from a machine's topology the way NCCL builds them.

Each channel is one ring (an order of all ranks) with its own threadblock;
the buffer is split evenly over the rings. On a switched machine (NVSwitch)
every channel uses the same order, one ring per link unit of a GPU's switch
port (12 on DGX A100); in a cluster each channel's per-node segment is
rotated so channels leave a node through different GPUs and NICs. On a
point-to-point machine the rings run over distinct links: a fully connected
8-GPU xGMI machine gets seven arc-disjoint rings, one per link of each GPU,
as RCCL does; a DGX-1 gets six. Without ``topology`` the machine is a fully
connected one of ``num_ranks`` GPUs.

``nccl_ring`` is allreduce (reduce-scatter then allgather around each ring,
2(n-1) steps), ``nccl_ring_allgather`` and ``nccl_ring_reduce_scatter`` take
n-1 steps. NCCL picks the protocol per size; compile with ``--protocol``
(``msccl-py tune`` tries them all).

    python programs/nccl_ring.py 8 --topology mi300x --protocol LL128
"""

from msccl_py.library.prelude import *
from msccl_py.topologies.rings import MAX_RINGS, program_rings

_COMMON = (Param("topology", str, None, "machine file or name the rings are built on"),
           Param("nodes", int, None, "copies of the machine (a cluster)", low=1),
           Param("rings", int, None, "rings (channels); default: as NCCL finds them",
                 low=1, high=MAX_RINGS))
_NOTE = "NCCL ring over the machine's links"


def _ring_steps(ring: list[int], position: int, hops: int, first: int = 0):
    """(src, dst) of ``hops`` consecutive hops starting at ring ``position``."""
    n = len(ring)
    return [(ring[(position + h) % n], ring[(position + h + 1) % n])
            for h in range(first, first + hops)]


# one threadblock runs a ring's 2n-1 steps: 64 on the newer runtimes
@library_program("allreduce", f"{_NOTE}: reduce-scatter + allgather per ring", params=_COMMON,
                 max_instances=4, chunking="rings", protocols=("Simple", "LL128", "LL"),
                 target_max_ranks=(("msccl-executor", 32), ("rccl", 32)))
def nccl_ring(num_ranks, topology=None, nodes=None, rings=None):
    """NCCL ring allreduce (returns the finished MSCCLProgram).

    >>> nccl_ring(4, rings=2).check()
    True
    """
    topo, order = program_rings(num_ranks, topology, nodes, rings)
    n, r_count = num_ranks, len(order)
    with program(AllReduce(n, n * r_count, True), topo, f"nccl_ring_{r_count}r",
                 threadblock_policy=ThreadblockPolicy.manual):
        for r, ring in enumerate(order):
            for c in range(n):
                for src, dst in _ring_steps(ring, c, n - 1):
                    chunk(dst, Buffer.input, r * n + c).reduce(
                        chunk(src, Buffer.input, r * n + c), ch=r, sendtb=r, recvtb=r)
            for c in range(n):
                for src, dst in _ring_steps(ring, c + n - 1, n - 1):
                    chunk(src, Buffer.input, r * n + c).copy(dst, Buffer.input, r * n + c,
                                                             ch=r, sendtb=r, recvtb=r)


@library_program("allgather", f"{_NOTE}: n-1 hops per block", max_instances=4, chunking="rings",
                 params=_COMMON + (Param("inplace", bool, False,
                                         "input is the rank's output block"),),
                 protocols=("Simple", "LL128", "LL"),
                 target_max_ranks=(("msccl-executor", 63), ("rccl", 63)))   # n+1 steps
def nccl_ring_allgather(num_ranks, topology=None, nodes=None, rings=None, inplace=False):
    """NCCL ring allgather: each rank's block is split over the rings.

    >>> nccl_ring_allgather(4, rings=3).check()
    True
    """
    topo, order = program_rings(num_ranks, topology, nodes, rings)
    n, r_count = num_ranks, len(order)
    with program(AllGather(n, r_count, inplace), topo, f"nccl_ring_allgather_{r_count}r",
                 threadblock_policy=ThreadblockPolicy.manual):
        for r, ring in enumerate(order):
            for position, rank in enumerate(ring):
                ref = chunk(rank, Buffer.input, r)
                if not inplace:
                    ref = ref.copy(rank, Buffer.output, rank * r_count + r, ch=r, sendtb=r)
                for _, dst in _ring_steps(ring, position, n - 1):
                    ref = ref.copy(dst, Buffer.output, rank * r_count + r, ch=r, sendtb=r,
                                   recvtb=r)


@library_program("reduce_scatter", f"{_NOTE}: n-1 hops per block", max_instances=4,
                 chunking="rings",
                 params=_COMMON + (Param("inplace", bool, True,
                                         "output is the rank's input block"),),
                 protocols=("Simple", "LL128", "LL"),
                 target_max_ranks=(("msccl-executor", 64), ("rccl", 64)))   # n steps
def nccl_ring_reduce_scatter(num_ranks, topology=None, nodes=None, rings=None, inplace=True):
    """NCCL ring reduce-scatter: block ``d`` ends, fully reduced, on rank ``d``.

    >>> nccl_ring_reduce_scatter(4, rings=2).check()
    True
    """
    topo, order = program_rings(num_ranks, topology, nodes, rings)
    n, r_count = num_ranks, len(order)
    # the out-of-place copies into scratch have no ring threadblock: let the compiler place them
    policy = ThreadblockPolicy.manual if inplace else ThreadblockPolicy.auto
    with program(ReduceScatter(n, r_count, inplace), topo,
                 f"nccl_ring_reduce_scatter_{r_count}r", threadblock_policy=policy):
        work = patterns.work_buffer(n, n * r_count, inplace)
        for r, ring in enumerate(order):
            for position, rank in enumerate(ring):
                index = rank * r_count + r
                for src, dst in _ring_steps(ring, position + 1, n - 1):
                    tbs = {"sendtb": r, "recvtb": r} if inplace else {}
                    chunk(dst, work, index).reduce(chunk(src, work, index), ch=r, **tbs)
        patterns.block_to_output(n, work, r_count, inplace)



if __name__ == "__main__":
    sys.exit(nccl_ring.main())
