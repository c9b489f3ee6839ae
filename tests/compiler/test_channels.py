"""Automatic channels and the threadblock budget of the auto policy."""

from __future__ import annotations

import pytest

from msccl_py.compiler.threadblocks import TB_BUDGET
from msccl_py.errors import MscclError
from msccl_py.language import *
from msccl_py.language.collectives import AllGather, AllReduce
from msccl_py.topologies import fully_connected
from msccl_py.verify import verify


def two_rings(n: int = 4, ch: int = -1, rings: int = 2) -> MSCCLProgram:
    """``rings`` interleaved ring allreduces over the same ranks, written without ``ch=``
    (the shape of an auto-scheduled hierarchical allreduce within a node)."""
    with MSCCLProgram("two_rings", fully_connected(n), AllReduce(n, n * rings, True), 1) as prog:
        for ring in range(rings):
            for c in range(n):
                index = c * rings + ring
                for step in range(n - 1):
                    chunk((step + 2 + c) % n, Buffer.input, index).reduce(
                        chunk((step + 1 + c) % n, Buffer.input, index), ch=ch)
        for ring in range(rings):
            for c in range(n):
                index = c * rings + ring
                for step in range(n - 1):
                    chunk((step + c) % n, Buffer.input, index).copy(
                        (step + 1 + c) % n, Buffer.input, index, ch=ch)
    return prog


@pytest.mark.parametrize("rings", [2, 3])
def test_rings_sharing_connections_get_a_channel_each(rings):
    prog = two_rings(rings=rings)
    assert prog.check()
    alg = prog.lower()
    assert alg.nchannels == rings
    verdict = verify(alg, target="msccl-executor")
    assert verdict.status == "ok", str(verdict)
    assert "deadlock-free with small and large messages" in str(verdict)


def test_a_lone_ring_keeps_one_channel():
    alg = two_rings(rings=1).lower()
    assert alg.nchannels == 1
    assert verify(alg).status == "ok"


def test_rings_the_program_put_on_one_channel_are_refused_with_the_cycle():
    prog = two_rings(ch=0)
    with pytest.raises(MscclError) as info:
        prog.generate_xml("msccl-executor")
    text = str(info.value)
    assert "no message size is deadlock-free" in text
    assert "waits for room in the FIFO to rank 1" in text and "on channel 0" in text
    assert "separate channels (ch=)" in text


def test_auto_threadblocks_pair_sends_and_receives_past_the_budget():
    n = TB_BUDGET // 2 + 8
    with MSCCLProgram("ag", fully_connected(n), AllGather(n, 1, False), 1) as prog:
        for r in range(n):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            for peer in range(n):
                if peer != r:
                    c.copy(peer, Buffer.output, r)
    alg = prog.lower()
    # one send and one receive threadblock per peer would be 2(n-1)
    assert max(len(g.threadblocks) for g in alg.gpus) <= TB_BUDGET
    assert verify(alg, target="rccl").status == "ok"
