"""Instruction fusion: a receive whose result is forwarded becomes one instruction.

``recv`` + ``send`` of the same slots → ``recv_copy_send``; ``recv_reduce_copy``
+ ``send`` → ``recv_reduce_copy_send``, or ``recv_reduce_send`` when the
reduced value is read by nothing but that send and is overwritten later.

A fused instruction runs at its receive's place in program order and sends
early; ``schedule`` undoes a fusion whose early send would reorder a
connection, and ``threadblocks`` one whose two peers cannot share a
threadblock (:func:`unfuse`).
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr

_FUSED = {"recv": "recv_copy_send", "recv_reduce_copy": "recv_reduce_copy_send"}


def fuse(dag: Dag, manual: bool) -> int:
    """Fuse in place; returns the number of fusions. An absorbed send's ``dag.carrier``
    entry names the fused instruction."""
    instrs = dag.instrs
    reader, nreaders, overwritten = dag.reader, dag.nreaders, dag.overwritten
    carrier = dag.carrier
    fused = 0
    for s in instrs:
        if s.op != "send" or len(s.preds) != 1:
            continue
        p = instrs[s.preds[0]]
        if (p.op not in _FUSED or p.dst is not s.src or p.count != s.count or p.ch != s.ch
                or p.inst != s.inst):
            continue
        if manual and p.recvtb != s.sendtb:
            continue
        p.op = _FUSED[p.op]
        p.sp = s.sp
        p.sendtb = s.sendtb
        p.absorbed = s.id
        carrier[s.id] = p.id
        if (p.op == "recv_reduce_copy_send" and nreaders[p.id] == 1 and reader[p.id] == s.id
                and overwritten[p.id] == p.count):
            p.op = "recv_reduce_send"
        fused += 1
    return fused


_UNFUSED = {"recv_copy_send": "recv", "recv_reduce_copy_send": "recv_reduce_copy",
            "recv_reduce_send": "recv_reduce_copy"}


def unfuse(dag: Dag, ins: Instr) -> Instr:
    """Split fused ``ins`` back into its receive (``ins``) and the send it absorbed."""
    send = dag.instrs[ins.absorbed]
    dag.carrier[send.id] = send.id
    ins.absorbed = -1
    ins.op = _UNFUSED[ins.op]
    ins.sp = -1
    return send

