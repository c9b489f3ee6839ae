"""Instruction fusion: a receive whose result is forwarded becomes one instruction.

``recv`` + ``send`` of the same slots → ``recv_copy_send``; ``recv_reduce_copy``
+ ``send`` → ``recv_reduce_copy_send``, or ``recv_reduce_send`` when the
reduced value is read by nothing but that send and is overwritten later.

Fused operations form chains (a ring's hops for one chunk) that the
scheduler treats as one node. A fusion is taken only when it keeps that
contracted graph acyclic: every predecessor of the newly joined receive must
precede the chain in program order or already be in it. Edges run forward
in program order (``Dag``), so this local test is exact and O(degree).
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag

_FUSED = {"recv": "recv_copy_send", "recv_reduce_copy": "recv_reduce_copy_send"}


def fuse(dag: Dag, manual: bool) -> int:
    """Fuse in place; returns the number of fusions. Absorbed sends get ``alive=False``."""
    instrs = dag.instrs
    fused = 0
    for s in instrs:
        if s.op != "send" or len(s.preds) != 1:
            continue
        p = instrs[next(iter(s.preds))]
        if (p.op not in _FUSED or p.dst != s.src or p.count != s.count or p.ch != s.ch
                or p.inst != s.inst):
            continue
        if manual and p.recvtb != s.sendtb:
            continue
        g = p.group
        nxt = instrs[s.match]
        if any(instrs[q].seq >= g and instrs[q].group != g for q in nxt.preds):
            continue
        p.op = _FUSED[p.op]
        p.sp = s.sp
        p.sendtb = s.sendtb
        p.peer_dst = s.peer_dst
        p.match = s.match  # p now feeds s's receiver; its own sender is found via peer links
        nxt.match = p.id
        nxt.group = g
        s.alive = False
        s.group = g
        s.fused_from = p.id
        if (p.op == "recv_reduce_copy_send" and p.readers == {s.id}
                and p.overwritten == p.count):
            p.op = "recv_reduce_send"
        fused += 1
    return fused


def resolve(instrs, i: int) -> int:
    """The live instruction that carries instruction ``i`` (an absorbed send's fuser)."""
    ins = instrs[i]
    while not ins.alive:
        ins = instrs[ins.fused_from]
    return ins.id
