"""XML() executes the lowered program first: large-message deadlocks get a maxBytes bound."""

from __future__ import annotations

from msccl_py.language import *
from msccl_py.language.collectives import Collective
from msccl_py.topologies import fully_connected
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml


class Bounce(Collective):
    """Rank 0's chunks go to rank 1 and come back into rank 0's output."""

    def init_buffers(self):
        k = self.chunk_factor
        return [{Buffer.input: [Chunk(r, i) for i in range(k)], Buffer.output: [None] * k}
                for r in range(2)]

    def check(self, prog):
        return all(prog.buffers[0][Buffer.output][i] == Chunk(0, i)
                   for i in range(self.chunk_factor))


def _bounce(k):
    # rank 0 sends and receives in one threadblock: with large messages it
    # blocks sending while rank 1 blocks forwarding into rank 0's full FIFO
    with MSCCLProgram("bounce", fully_connected(2), Bounce(2, k, False), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as prog:
        tmp = chunk(0, Buffer.input, 0, k).copy(1, "tmp", 0, sendtb=0, recvtb=0)
        tmp.copy(0, Buffer.output, 0, sendtb=0, recvtb=0)
        assert Check()
    return prog


def test_large_message_deadlock_bounds_max_bytes(capsys):
    prog = _bounce(10)
    alg = read_xml(prog.generate_xml("msccl"))
    err = capsys.readouterr().err
    assert "deadlocks with large messages" in err and f"maxBytes={alg.max_bytes}" in err
    assert 0 < alg.max_bytes < 1 << 40
    v = verify(alg, target="msccl", postcondition=prog.postcondition())
    assert v.regimes["small"].deadlock_free and not v.regimes["large"].deadlock_free


def test_deadlock_free_program_keeps_unbounded_size(capsys):
    prog = _bounce(2)
    alg = read_xml(prog.generate_xml("msccl"))
    assert alg.max_bytes == 0          # reads back as unbounded
    assert "deadlock" not in capsys.readouterr().err


def test_check_xml_false_skips_verification(capsys):
    prog = _bounce(10)
    prog.check_xml = False
    alg = read_xml(prog.generate_xml("msccl"))
    assert alg.max_bytes == 0          # reads back as unbounded
    assert "deadlock" not in capsys.readouterr().err
