"""Automatic channels: flows that would crowd one connection in one round ride apart.

A *flow* is a chain of transfers joined by fused instructions: a chunk sent,
received and forwarded (``recv_copy_send``, ``recv_reduce_send``, ...) hop
by hop until a plain receive ends it, e.g. one chunk's trip around a ring.
All hops of a flow share one channel (a fused instruction receives and
sends on the channel of its threadblock).

Why it matters: a fused step needs its input and room in the FIFO to its
successor at once. If two flows start on one connection in the same round,
each rank of the ring sends both before it receives, a Simple-protocol FIFO
(two transfers) is full, and every rank waits on its successor: a deadlock
at every size. Two rings written without ``ch=`` are the common case (an
auto-scheduled hierarchical allreduce). msccl-tools gives every flow that
shares a connection with another its own channel; the rule here is
narrower, so a lone ring keeps one channel and one threadblock per peer:
a flow takes the lowest channel that no other flow holds on any of its
connections *in the same round*. Flows the program placed itself (``ch=``)
and single hops keep their channel and are placed first. Channels stop at
:data:`MAX_CHANNELS`; past it a flow takes the channel it shares with the
fewest flows.

Cost: one walk over the transfers, times the channels tried per flow.

>>> from msccl_py.compiler.trace import Op
>>> from msccl_py.compiler.dag import Dag
>>> from msccl_py.compiler import fusion
>>> # chunks 0 and 1 both travel 0 -> 1 -> 2, side by side
>>> ops = [Op("copy", 0, "i", k, 1, "i", k, 1) for k in (0, 1)]
>>> ops += [Op("copy", 1, "i", k, 2, "i", k, 1) for k in (0, 1)]
>>> dag = Dag(ops, [{"i": 2, "o": 0, "s": 0}] * 3, {})
>>> fusion.fuse(dag, False), assign(dag)
(2, 1)
>>> sorted({ins.ch for ins in dag.instrs})
[0, 1]
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr

#: channels every runtime runs (RCCL allows 128, the others 32)
MAX_CHANNELS = 32


def _flows(dag: Dag) -> list[list[Instr]]:
    """Each flow's sending instructions, in hop order (a plain send first)."""
    instrs = dag.instrs
    carrier = dag.carrier
    flows = []
    for ins in instrs:
        if carrier[ins.id] != ins.id or ins.sp < 0 or ins.rp >= 0:
            continue
        chain = [ins]
        nxt = instrs[ins.match]
        while nxt.sp >= 0 and nxt.absorbed >= 0:
            chain.append(nxt)
            nxt = instrs[instrs[nxt.absorbed].match]
        flows.append(chain)
    return flows


def _hops(dag: Dag, chain: list[Instr]) -> list[tuple]:
    """``(rank, send peer, instance, round)`` of each transfer of a flow."""
    instrs = dag.instrs
    return [(ins.rank, ins.sp, ins.inst,
             instrs[ins.absorbed].level if ins.absorbed >= 0 else ins.level) for ins in chain]


def _set(dag: Dag, chain: list[Instr], ch: int) -> None:
    instrs = dag.instrs
    for ins in chain:
        ins.ch = ch
        if ins.absorbed >= 0:  # kept in step, in case the fusion is undone
            instrs[ins.absorbed].ch = ch
    last = chain[-1]
    send = instrs[last.absorbed] if last.absorbed >= 0 else last
    instrs[send.match].ch = ch


def assign(dag: Dag, limit: int = MAX_CHANNELS) -> int:
    """Set the channel of every automatic multi-hop flow; returns how many left channel 0."""
    held: dict[tuple, list[int]] = {}
    auto = []
    for chain in _flows(dag):
        if len(chain) > 1 and chain[0].ch < 0:
            auto.append(chain)
            continue
        ch = chain[0].ch if chain[0].ch >= 0 else 0
        for hop in _hops(dag, chain):
            held.setdefault(hop, []).append(ch)
    auto.sort(key=lambda chain: (chain[0].level, chain[0].seq))
    moved = 0
    for chain in auto:
        hops = _hops(dag, chain)
        taken: list[int] = []
        for hop in hops:
            taken.extend(held.get(hop, ()))
        busy = set(taken)
        ch = next((c for c in range(limit) if c not in busy), -1)
        if ch < 0:
            ch = min(range(limit), key=taken.count)
        _set(dag, chain, ch)
        for hop in hops:
            held.setdefault(hop, []).append(ch)
        moved += ch > 0
    return moved
