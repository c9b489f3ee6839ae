"""The happens-before graph of a lowered program.

Nodes are IR steps. A step waits for the previous step of its threadblock,
for every step it names in ``depends``, and (for a receive) for the matching
send on the other end of its connection. Connections are one FIFO per
(channel, sender, receiver); their sends and receives pair up one for one in
order, which is how the runtimes execute them.

>>> from msccl_py import ir
>>> send = ir.Step("send", src=ir.Loc("i", 0), dst=ir.Loc("o", 0))
>>> recv = ir.Step("recv", src=ir.Loc("i", 0), dst=ir.Loc("o", 0))
>>> alg = ir.Algorithm("p2p", "custom", "Simple", False, 2, 1, 1, gpus=[
...     ir.Gpu(0, 1, 1, threadblocks=[ir.Threadblock(0, send_peer=1, steps=[send])]),
...     ir.Gpu(1, 1, 1, threadblocks=[ir.Threadblock(0, recv_peer=0, steps=[recv])])])
>>> build_graph(alg).matches
[(StepRef(rank=0, tb=0, step=0), StepRef(rank=1, tb=0, step=0))]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msccl_py import ir
from msccl_py.errors import VerificationError


@dataclass(frozen=True)
class StepRef:
    """One step of the program: GPU rank, threadblock id, IR step index."""

    rank: int
    tb: int
    step: int

    def __str__(self) -> str:
        return f"rank {self.rank} tb {self.tb} step {self.step}"


@dataclass
class StepGraph:
    """Steps as dense node ids with weighted successor lists.

    ``comm[e]`` is True for a send→receive edge, False for an edge inside one
    GPU (program order or ``depends``).
    """

    refs: list[StepRef]
    steps: list[ir.Step]
    succ: list[list[tuple[int, bool]]]
    matches: list[tuple[StepRef, StepRef]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.refs)


def build_graph(alg: ir.Algorithm) -> StepGraph:
    """Build the happens-before graph of ``alg``; raise if it is malformed.

    Raises :class:`VerificationError` naming the rank/threadblock/step when a
    dependency points at a missing step, a step sends or receives on a
    threadblock without that peer, two threadblocks share one connection, or
    a connection's sends and receives do not pair up in number and count.

    >>> build_graph(ir.Algorithm("empty", "custom", "Simple", False, 0, 1, 1)).refs
    []
    """
    refs: list[StepRef] = []
    steps: list[ir.Step] = []
    base: dict[tuple[int, int], int] = {}
    tbs: dict[tuple[int, int], ir.Threadblock] = {}
    for gpu, tb in alg.threadblocks():
        key = (gpu.rank, tb.id)
        if key in base:
            raise VerificationError(f"rank {gpu.rank}: threadblock id {tb.id} appears twice")
        base[key] = len(refs)
        tbs[key] = tb
        for index, step in enumerate(tb.steps):
            refs.append(StepRef(gpu.rank, tb.id, index))
            steps.append(step)
    succ: list[list[tuple[int, bool]]] = [[] for _ in refs]

    sends: dict[tuple[int, int, int], list[int]] = {}
    recvs: dict[tuple[int, int, int], list[int]] = {}
    owner: dict[tuple[str, int, int, int], int] = {}
    for (rank, tb_id), tb in tbs.items():
        first = base[(rank, tb_id)]
        for index, step in enumerate(tb.steps):
            node = first + index
            where = refs[node]
            if index:
                succ[node - 1].append((node, False))
            for dep_tb, dep_step in step.depends:
                dep = tbs.get((rank, dep_tb))
                if dep is None or not 0 <= dep_step < len(dep.steps):
                    raise VerificationError(
                        f"{where} depends on tb {dep_tb} step {dep_step}, which does not exist")
                succ[base[(rank, dep_tb)] + dep_step].append((node, False))
            if step.is_send:
                if tb.send_peer < 0:
                    raise VerificationError(
                        f"{where}: {step.op} on a threadblock with no send peer")
                _claim(owner, ("send", rank, tb.send_peer, tb.channel), tb_id, where)
                sends.setdefault((rank, tb.send_peer, tb.channel), []).append(node)
            if step.is_recv:
                if tb.recv_peer < 0:
                    raise VerificationError(
                        f"{where}: {step.op} on a threadblock with no recv peer")
                _claim(owner, ("recv", tb.recv_peer, rank, tb.channel), tb_id, where)
                recvs.setdefault((tb.recv_peer, rank, tb.channel), []).append(node)

    matches = []
    for conn in sorted(set(sends) | set(recvs)):
        out, into = sends.get(conn, []), recvs.get(conn, [])
        src, dst, chan = conn
        if len(out) != len(into):
            raise VerificationError(
                f"connection {src}->{dst} channel {chan}: {len(out)} sends but "
                f"{len(into)} receives")
        for a, b in zip(out, into):
            if steps[a].count != steps[b].count:
                raise VerificationError(
                    f"connection {src}->{dst} channel {chan}: {refs[a]} sends {steps[a].count} "
                    f"chunks but {refs[b]} receives {steps[b].count}")
            succ[a].append((b, True))
            matches.append((refs[a], refs[b]))
    return StepGraph(refs, steps, succ, matches)


def _claim(owner: dict, key: tuple, tb_id: int, where: StepRef) -> None:
    """Record that ``tb_id`` uses connection ``key``; two threadblocks may not share one."""
    held = owner.setdefault(key, tb_id)
    if held != tb_id:
        kind, src, dst, chan = key
        raise VerificationError(
            f"{where}: threadblocks {held} and {tb_id} both {kind} on connection "
            f"{src}->{dst} channel {chan}")
