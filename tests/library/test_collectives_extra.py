"""The library's custom collectives catch programs that miss their postcondition."""

from msccl_py.language import Buffer, MSCCLProgram, chunk
from msccl_py.library.collectives_extra import Barrier, SendToNext
from msccl_py.topologies import fully_connected


def barrier(n, rounds):
    with MSCCLProgram("b", fully_connected(n), Barrier(n), 1) as prog:
        for r in range(n):
            chunk(r, Buffer.input, 0).copy(r, Buffer.output, 0)
        for k in range(rounds):
            for r in range(n):
                chunk(r, Buffer.output, 0).copy((r + 2 ** k) % n, "heard", k)
            for r in range(n):
                chunk(r, Buffer.output, 0).reduce(chunk(r, "heard", k))
    return prog


def test_barrier_needs_every_token(capsys):
    assert barrier(5, 3).check()
    assert not barrier(5, 2).check()  # 2 rounds reach only 4 of 5 ranks
    assert "tokens 0 of all ranks" in capsys.readouterr().err


def send(n, cyclic, pairs):
    with MSCCLProgram("s", fully_connected(n), SendToNext(n, 2, False, cyclic), 1) as prog:
        for src, dst in pairs:
            chunk(src, Buffer.input, 0, 2).copy(dst, Buffer.output, 0)
    return prog


def test_send_to_next():
    assert send(3, False, [(0, 1), (1, 2)]).check()
    assert not send(3, True, [(0, 1), (1, 2)]).check()  # rank 0 must hear from rank 2
    assert send(3, True, [(0, 1), (1, 2), (2, 0)]).check()
    assert not send(3, False, [(0, 2), (1, 2)]).check()
