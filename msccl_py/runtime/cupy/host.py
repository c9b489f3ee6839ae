"""Host-driven GPU fallback: one CuPy operation per step, ordered with streams and events.

An independent implementation of the execution semantics for checking the
interpreter on a GPU, and a way to run plans too large to be co-resident.
Each send is matched to its receive at plan time and gets its own staging
buffer (an unbounded FIFO), every step runs once on whole chunks (no
pipeline iterations), each threadblock has its own stream, and
dependencies and send -> receive edges are events. Steps are enqueued in a
topological order of those edges (a cycle is a deadlock and an error), so
every event a stream waits on has been recorded. Back-pressure is not
modelled. All ranks live on the current device.

>>> from msccl_py.runtime.cupy.host import order_steps   # doctest: +SKIP
"""

from __future__ import annotations

from collections import deque

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.plan import tables as P
from msccl_py.plan.contract import REDUCING, REDUCTIONS
from msccl_py.plan.moves import MOVES
from msccl_py.runtime.cupy import calls, packer


def _publisher(plan: P.Plan, block: int, index: int) -> int:
    """Plan row whose completion satisfies 'block has published >= index'.

    That is the first step at or after ``index`` with dependents (what the
    device flag would show); the block's last step when none has them.
    """
    b = plan.blocks[block]
    begin, n = int(b[P.B_STEP_BEGIN]), int(b[P.B_NSTEPS])
    rows = np.flatnonzero(plan.steps[begin + index:begin + n, P.S_HAS_DEP])
    return begin + index + int(rows[0]) if len(rows) else begin + n - 1


def order_steps(plan: P.Plan) -> tuple[list[int], dict[int, list[int]]]:
    """A topological order of all step rows and each row's cross-stream predecessors.

    Edges: program order within a threadblock (same stream, implicit),
    matching send -> receive, and dependencies. Raises MscclDeadlockError
    naming a step on a cycle.
    """
    st = plan.steps
    n = len(st)
    preds: dict[int, list[int]] = {i: [] for i in range(n)}
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)

    def edge(a: int, b: int, cross: bool) -> None:
        succ[a].append(b)
        indeg[b] += 1
        if cross:
            preds[b].append(a)

    for row in range(n):
        if row + 1 < n and st[row + 1, P.S_BLOCK] == st[row, P.S_BLOCK]:
            edge(row, row + 1, False)
        if st[row, P.S_RECV_PEER_STEP] >= 0:
            edge(int(st[row, P.S_RECV_PEER_STEP]), row, True)
        for d in plan.step_deps(row):
            edge(_publisher(plan, int(d[P.D_BLOCK]), int(d[P.D_INDEX])), row, True)
    ready = deque(int(i) for i in np.flatnonzero(indeg == 0))
    order = []
    while ready:
        a = ready.popleft()
        order.append(a)
        for b in succ[a]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if len(order) < n:
        stuck = int(np.flatnonzero(indeg > 0)[0])
        raise MscclDeadlockError(f"host fallback: {plan.describe_step(stuck)} is on a cycle of "
                                 "receives and dependencies, so it can never run")
    return order, preds


def run(alg: ir.Algorithm, inputs: list, op: str = "sum", inplace: bool | None = None,
        dtype: str | None = None, as_cupy: bool = False) -> list:
    """Execute ``alg`` with one CuPy op per step on the current GPU (reference.run's contract)."""
    from msccl_py.runtime.cupy.device import require_cupy
    cp = require_cupy()
    pk = packer.pack(alg)
    plan = pk.plan
    lay = calls.layout(alg, plan, inputs, dtype, inplace)
    if lay.dtype == "bfloat16":
        raise MscclRuntimeError("the host fallback has no bfloat16 arithmetic (CuPy lacks the "
                                "dtype); use placement='one-gpu'")
    if op not in REDUCTIONS:
        raise MscclRuntimeError(f"unknown reduction op {op!r}")
    ufunc = getattr(cp, REDUCTIONS[op].__name__)   # CuPy's ufunc of NumPy's name
    S = lay.chunk_elems
    n = plan.ngpus
    store = [calls.poisoned_row(cp, lay, r) for r in range(n)]
    for r, x in enumerate(inputs):
        base, off = lay.offset(r, 0)
        src = cp.asarray(x).reshape(-1)
        store[r][base][off:off + src.size] = src

    def chunks(rank: int, buf: int, off: int, cnt: int):
        base, start = lay.offset(rank, buf)
        lo = start + off * S
        return store[rank][base][lo:lo + cnt * S]

    order, preds = order_steps(plan)
    st = plan.steps
    streams = [cp.cuda.Stream(non_blocking=False) for _ in range(plan.nblocks)]
    done: dict[int, object] = {}
    staged: dict[int, object] = {}
    # staging buffers stay referenced until the end: freeing one while another
    # stream still reads it would let the pool hand it out again
    keep: list = []
    cp.cuda.runtime.deviceSynchronize()
    for row in order:
        s = st[row]
        blk = int(s[P.S_BLOCK])
        rank = int(plan.blocks[blk, P.B_RANK])
        opc, cnt = int(s[P.S_OP]), int(s[P.S_COUNT])
        stream = streams[blk]
        for p in preds[row]:
            stream.wait_event(done[p])
        with stream:
            src = (chunks(rank, int(s[P.S_SRC_BUF]), int(s[P.S_SRC_OFF]), cnt)
                   if P.LOCAL_SRC[opc] else None)
            dst = (chunks(rank, int(s[P.S_DST_BUF]), int(s[P.S_DST_OFF]), cnt)
                   if P.LOCAL_DST[opc] else None)
            recv = staged.pop(int(s[P.S_RECV_PEER_STEP])) if P.IS_RECV[opc] else None
            keep.append(recv)
            send = None
            if P.IS_SEND[opc]:   # a new buffer, or the received one forwarded as it is
                send = recv if opc == P.OP_RCS else cp.empty(src.shape, src.dtype)
                staged[row] = send
                keep.append(send)
            MOVES[opc](ufunc, src, dst, dst, recv, send)
            ev = cp.cuda.Event(disable_timing=True)
            ev.record(stream)
            done[row] = ev
    cp.cuda.runtime.deviceSynchronize()
    keep.clear()
    outs = []
    for r in range(n):
        base, off = lay.offset(r, 1)
        o = store[r][base][off:off + int(lay.call_chunks[r, 1]) * S]
        host = cp.asnumpy(o)
        if op == "avg" and alg.collective in REDUCING:
            host = calls.divide_for_avg(host, lay.dtype, alg.ngpus)
        outs.append(cp.asarray(host) if as_cupy else host)
    return outs
