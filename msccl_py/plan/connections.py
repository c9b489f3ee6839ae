"""Connection matching: each FIFO's sends and receives must pair one for one.

For every (channel, sender -> receiver) the sender's send-type steps and the
receiver's recv-type steps are matched in order; the number of steps and each
pair's count must agree, and both ends must exist.

>>> from msccl_py import ir
>>> from msccl_py.plan.tables import build_plan
>>> s = ir.Threadblock(0, send_peer=1, steps=[ir.Step("send", ir.Loc("i", 0), count=2)])
>>> r = ir.Threadblock(0, recv_peer=0, steps=[ir.Step("recv", dst=ir.Loc("o", 0))])
>>> alg = ir.Algorithm("a", "custom", "Simple", False, 2, 2, 1,
...                    [ir.Gpu(0, 2, 2, 0, [s]), ir.Gpu(1, 2, 2, 0, [r])])
>>> print(check_connections(build_plan(alg))[0])
rank 0 tb 0 step 0: sends 2 chunks to rank 1 on channel 0, but rank 1 tb 0 step 0 receives 1
"""

from __future__ import annotations

import numpy as np

from msccl_py.plan.tables import (
    B_RANK,
    B_TB,
    C_CHAN,
    C_NRECVS,
    C_NSENDS,
    C_RECEIVER,
    C_RECV_BLOCK,
    C_SEND_BLOCK,
    C_SENDER,
    IS_RECV,
    IS_SEND,
    S_COUNT,
    S_INDEX,
    S_OP,
    S_SEND_PEER_STEP,
    Plan,
)
from msccl_py.plan.findings import Finding


def _conn_steps(plan: Plan, block: int, sends: bool) -> np.ndarray:
    rows = plan.block_steps(block)
    mask = (IS_SEND if sends else IS_RECV)[rows[:, S_OP]]
    return rows[mask]


def check_connections(plan: Plan) -> list[Finding]:
    """Findings for every connection whose two ends do not pair up."""
    if _all_pair_up(plan):
        return []
    out: list[Finding] = []
    for c in plan.conns:
        chan, sender, receiver = int(c[C_CHAN]), int(c[C_SENDER]), int(c[C_RECEIVER])
        sb, rb = int(c[C_SEND_BLOCK]), int(c[C_RECV_BLOCK])
        if sb < 0 or rb < 0:
            if sb >= 0 and c[C_NSENDS]:
                out.append(Finding("connection", f"sends to rank {receiver} on channel {chan}, "
                                   f"but no threadblock of rank {receiver} receives from rank "
                                   f"{sender} on channel {chan}", sender,
                                   int(plan.blocks[sb, B_TB])))
            if rb >= 0 and c[C_NRECVS]:
                out.append(Finding("connection", f"receives from rank {sender} on channel "
                                   f"{chan}, but no threadblock of rank {sender} sends to rank "
                                   f"{receiver} on channel {chan}", receiver,
                                   int(plan.blocks[rb, B_TB])))
            continue
        stb, rtb = int(plan.blocks[sb, B_TB]), int(plan.blocks[rb, B_TB])
        srows, rrows = _conn_steps(plan, sb, True), _conn_steps(plan, rb, False)
        n = min(len(srows), len(rrows))
        bad = np.nonzero(srows[:n, S_COUNT] != rrows[:n, S_COUNT])[0]
        if len(bad):
            k = int(bad[0])
            out.append(Finding("connection", f"sends {srows[k, S_COUNT]} chunks to rank "
                               f"{receiver} on channel {chan}, but rank {receiver} tb {rtb} step "
                               f"{rrows[k, S_INDEX]} receives {rrows[k, S_COUNT]}", sender, stb,
                               int(srows[k, S_INDEX])))
        if len(srows) != len(rrows):
            more, fewer = ("sends", "receives") if len(srows) > len(rrows) else (
                "receives", "sends")
            out.append(Finding("connection", f"channel {chan} rank {sender} -> rank {receiver}: "
                               f"rank {sender} tb {stb} sends {len(srows)} times but rank "
                               f"{receiver} tb {rtb} receives {len(rrows)} times per "
                               f"iteration (one side {more} more than the other {fewer})",
                               int(plan.blocks[sb, B_RANK]), stb))
    return out


def _all_pair_up(plan: Plan) -> bool:
    """Whether no connection has a finding, decided on whole columns at once: both ends
    there with as many sends as receives, or a lone end that never moves data, and every
    send paired by the plan (its ``S_SEND_PEER_STEP``) of the count its receive has."""
    c = plan.conns
    sb, rb = c[:, C_SEND_BLOCK] >= 0, c[:, C_RECV_BLOCK] >= 0
    both = sb & rb
    if ((both & (c[:, C_NSENDS] != c[:, C_NRECVS])).any()
            or (~both & ((sb & (c[:, C_NSENDS] > 0)) | (rb & (c[:, C_NRECVS] > 0)))).any()):
        return False
    peer = plan.steps[:, S_SEND_PEER_STEP]
    paired = peer >= 0
    count = plan.steps[:, S_COUNT]
    return not (count[paired] != count[peer[paired]]).any()
