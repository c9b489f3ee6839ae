"""One ring allreduce written three ways, and what each changes in the XML.

The algorithm is always the same: rank r's buffer is cut into N chunks; chunk k
is reduced hop by hop around the ring starting at rank k (N-1 hops), then the
finished chunk travels on around the ring (N-1 more hops).

    A. automatic threadblocks, one channel   (the compiler decides)
    B. manual threadblocks on two channels   (``sendtb``/``recvtb``/``ch`` decide)
    C. instances=2                           (the whole algorithm replicated)

For each version the script prints the ``msccl-py info`` summary
(``msccl_py.targets.msccl.summary``), rank 0's threadblocks (peers, channel, steps), and
the verifier's verdict. Read the notes it prints: they say why the XML changed.

Run: ``python examples/ring_allreduce_walkthrough.py``
"""

from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.topologies import fully_connected
from msccl_py.verify import verify
from msccl_py.targets.msccl import summary

N = 4


def ring_allreduce(name: str, channels: int = 1, instances: int = 1,
                   manual: bool = False) -> MSCCLProgram:
    """The ring; with ``manual``, chunk k runs on channel/threadblock ``k % channels``."""
    policy = ThreadblockPolicy.manual if manual else ThreadblockPolicy.auto
    with MSCCLProgram(name, fully_connected(N), AllReduce(N, N, True), instances,
                      threadblock_policy=policy) as prog:

        def where(k):   # keyword arguments that place chunk k's transfers
            c = k % channels
            return dict(ch=c, sendtb=c, recvtb=c) if manual else {}

        for step in range(N - 1):                        # reduce-scatter half
            for k in range(N):
                src, dst = (k + step) % N, (k + step + 1) % N
                chunk(dst, Buffer.input, k).reduce(chunk(src, Buffer.input, k), **where(k))
        for step in range(N - 1):                        # allgather half
            for k in range(N):
                src, dst = (k + step - 1) % N, (k + step) % N
                chunk(src, Buffer.input, k).copy(dst, Buffer.input, k, **where(k))
        if not Check():
            raise SystemExit(f"{name}: Check() failed")
    return prog


def show(title: str, prog: MSCCLProgram, note: str) -> None:
    alg = prog.lower()          # the IR that XML() writes; read_xml() gives the same back
    print(f"== {title}")
    print(summary(alg))
    print("  rank 0 threadblocks:   id  send  recv  chan  steps")
    for tb in alg.gpus[0].threadblocks:
        ops = " ".join(step.op for step in tb.steps)
        print(f"  {'':21}{tb.id:>3}  {tb.send_peer:>4}  {tb.recv_peer:>4}  {tb.channel:>4}  {ops}")
    print(f"  verify: {verify(alg)}")
    print("  why: " + note)
    print()


show("A. automatic threadblocks, 1 channel", ring_allreduce("ring_auto"),
     "every transfer of rank 0 goes to rank 1 and comes from rank 3, so the compiler "
     "needs one connection pair and puts all 7 steps in one threadblock; consecutive "
     "receive-then-send pairs were fused into recv_reduce_send / recv_copy_send.")

show("B. manual threadblocks, 2 channels", ring_allreduce("ring_2ch", channels=2, manual=True),
     "chunks 0 and 2 run on channel 0 and threadblock 0, chunks 1 and 3 on channel 1 and "
     "threadblock 1: two rings run in parallel, each with its own FIFO (a connection is "
     "one (channel, peer) pair), so each threadblock has about half the steps.")

show("C. 2 instances (automatic threadblocks)", ring_allreduce("ring_x2", instances=2),
     "instances copy the whole algorithm: every chunk is split in two (nchunksperloop "
     "4 -> 8) and each copy gets its own channel and threadblocks; the XML has twice "
     "the steps, each moving half as much data, so two rings overlap.")

print("All three compute the same allreduce; they differ in how much runs in parallel")
print("(threadblocks are CUDA blocks, channels are separate FIFO connections).")
