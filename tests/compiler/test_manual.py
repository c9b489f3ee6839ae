"""Manual threadblocks where the program leaves some ``sendtb``/``recvtb`` out."""

from __future__ import annotations

import pytest

from msccl_py.errors import ProgramError
from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.topologies import fully_connected
from msccl_py.verify import verify


def ring_then_mirror(size: int, rings: int) -> MSCCLProgram:
    """Ring-reduce over ranks 0..size-1 with named threadblocks, hand each reduced chunk
    to the mirror rank ``r + size`` with no threadblock named, then ring it round the
    mirror half with named threadblocks again (the pipelined two-ring shape)."""
    n = 2 * size
    with MSCCLProgram("ring_then_mirror", fully_connected(n), AllReduce(n, size, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as prog:
        for step in range(size - 1):
            for k in range(size):
                tb = k % rings
                chunk((k + step + 1) % size, Buffer.input, k).reduce(
                    chunk((k + step) % size, Buffer.input, k), ch=tb, sendtb=tb, recvtb=tb)
        for k in range(size):
            owner = (k - 1) % size
            chunk(owner, Buffer.input, k).copy(owner + size, Buffer.input, k, ch=owner % 2)
        for step in range(-1, size - 2):
            for k in range(size):
                tb = k % rings
                src = (k + step) % size + size
                chunk(src, Buffer.input, k).copy((k + step + 1) % size + size, Buffer.input, k,
                                                 ch=tb, sendtb=tb, recvtb=tb)
    return prog


@pytest.mark.parametrize("size,rings", [(4, 1), (4, 2)])
def test_left_out_threadblocks_join_one_more_per_rank(size, rings):
    prog = ring_then_mirror(size, rings)
    alg = prog.lower()
    for gpu in alg.gpus:
        spare = [tb for tb in gpu.threadblocks
                 if (tb.send_peer - gpu.rank) % (2 * size) == size
                 or (gpu.rank - tb.recv_peer) % (2 * size) == size]
        # the cross copy rides its own threadblock on its own channel
        assert len(spare) == 1 and spare[0].channel == (gpu.rank % size) % 2
        assert len(gpu.threadblocks) == rings + 1
    # like the pipelined original this is no allreduce of all 2*size ranks: judge the
    # XML against what the program computes
    verdict = verify(alg, target="msccl", postcondition=prog.postcondition())
    assert verdict.status == "ok", str(verdict)


def test_left_out_threadblocks_still_take_one_peer_each():
    with MSCCLProgram("two_peers", fully_connected(3), AllReduce(3, 1, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual):
        chunk(0, Buffer.input, 0).copy(1, "s", 0)
        with pytest.raises(ProgramError) as info:
            chunk(0, Buffer.input, 0).copy(2, "s", 0)
            XML()
    text = str(info.value)
    assert "the threadblock of operations without sendtb/recvtb on rank 0" in text
    assert "send peer 2" in text and "send peer 1" in text
    assert "test_manual.py" in text
