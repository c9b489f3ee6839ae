"""NumPy reference runtime: executes a plan for all ranks in one process, on real arrays.

It runs the verifier's execution model (:func:`msccl_py.plan.events.simulate`:
threadblocks scheduled until they block, dependency flags, FIFOs holding
``fifo_transfers`` transfers) with NumPy data attached, so its behaviour,
deadlocks included, is the one the verifier predicts. Each chunk is a row of
a ``(chunks, S)`` view of a rank's buffer; one transfer moves rows
``[lo, hi)`` of the current iteration's column slice with one NumPy call, so
the Python cost is per transfer, not per element.

Inputs: one 1-D array per rank, all of one dtype, each the rank's input as
NCCL takes it (``count`` elements for allreduce/allgather/broadcast/reduce,
``count * ngpus`` for reduce_scatter and alltoall), i.e. the collective's
input chunks of ``S`` elements. Outputs: each rank's output buffer (arrays
the call allocated, not shared with anything). Output and scratch start filled with NaN (floats) or a fixed
pattern (integers) so reading unwritten data shows up. In-place calls alias
buffers as :mod:`msccl_py.collective_table` says; the caller's arrays are never modified.

>>> import numpy as np
>>> from msccl_py import ir
>>> tb = lambda r: ir.Threadblock(0, send_peer=1 - r, recv_peer=1 - r, steps=[
...     ir.Step("send", ir.Loc("i", 0)), ir.Step("recv", dst=ir.Loc("o", 1 - r)),
...     ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", r))])
>>> alg = ir.Algorithm("ag", "allgather", "Simple", False, 2, 2, 1,
...                    [ir.Gpu(r, 1, 2, 0, [tb(r)]) for r in range(2)])
>>> [o.tolist() for o in run(alg, [np.array([1.0, 2.0]), np.array([3.0, 4.0])])]
[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]
"""

from __future__ import annotations

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError
from msccl_py.runtime.expected import finish_avg
from msccl_py.plan.geometry import call_geometry
from msccl_py.plan.moves import MOVES
from msccl_py.plan.tables import (B_RANK, BUF_I, BUF_O, IS_SEND, LOCAL_DST, LOCAL_SRC, S_BLOCK,
                                  S_DST_BUF, S_DST_OFF, S_OP, S_SRC_BUF, S_SRC_OFF, Plan,
                                  plan_for)
from msccl_py.plan.events import simulate
from msccl_py.plan.contract import (admit, averages, check_inputs, chunk_elems, physical_chunks,
                                    reduction, resolve_inplace)


def poison(dtype: np.dtype):
    """Fill value of buffers nobody has written."""
    if np.issubdtype(dtype, np.integer):
        return np.iinfo(dtype).max // 3
    return np.nan


class _Pool:
    """Reusable FIFO payload arrays keyed by shape (avoids a fresh allocation per transfer)."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.free: dict[tuple, list] = {}

    def get(self, shape):
        lst = self.free.get(shape)
        return lst.pop() if lst else np.empty(shape, self.dtype)

    def put(self, arr) -> None:
        self.free.setdefault(arr.shape, []).append(arr)


class _NumpyData:
    """The data side of the model: moves slices between per-rank NumPy buffers."""

    every_iteration = True

    def __init__(self, plan: Plan, views, cg, ufunc):
        self.cg = cg
        self.ufunc = ufunc
        self.pool = _Pool(views[0][0].dtype)
        st = plan.steps
        self.ops = []
        for g in range(len(st)):
            op = int(st[g, S_OP])
            r = int(plan.blocks[st[g, S_BLOCK], B_RANK])
            src = views[r][int(st[g, S_SRC_BUF])] if LOCAL_SRC[op] else None
            dst = views[r][int(st[g, S_DST_BUF])] if LOCAL_DST[op] else None
            self.ops.append((op, src, int(st[g, S_SRC_OFF]), dst, int(st[g, S_DST_OFF])))

    def transfer(self, g, lo, hi, payload, iteration):
        """Move chunks ``[lo, hi)`` of step ``g`` (:data:`~msccl_py.plan.moves.MOVES`); a
        forwarding op sends the buffer it received, others a pooled one."""
        op, src, so, dst, do = self.ops[g]
        e0, e1 = self.cg.slice(iteration)
        s = None if src is None else src[so + lo:so + hi, e0:e1]
        d = None if dst is None else dst[do + lo:do + hi, e0:e1]
        ss = None
        if IS_SEND[op]:
            ss = payload if payload is not None else self.pool.get((hi - lo, e1 - e0))
        MOVES[op](self.ufunc, s, d, d, payload, ss)
        if payload is not None and ss is None:
            self.pool.put(payload)
        return ss


def run(alg: ir.Algorithm, inputs: list[np.ndarray], op: str = "sum",
        inplace: bool | None = None, slice_elems: int | None = None,
        buffsize: int | None = None) -> list[np.ndarray]:
    """Execute ``alg`` on ``inputs`` (one array per rank); return each rank's output.

    ``slice_elems`` overrides the protocol's pipeline slice (elements of each
    chunk per iteration); ``buffsize`` the FIFO buffer size the geometry
    derives it from. A deadlock raises :class:`MscclDeadlockError` naming
    the wait cycle.
    """
    plan = plan_for(alg)
    admit(alg, plan)
    ufunc = reduction(op)
    g = alg.ngpus
    arrs = [np.asarray(x) for x in inputs]
    check_inputs(alg, arrs)
    dtype = arrs[0].dtype
    cc = plan.call_chunks
    S = chunk_elems(alg, cc, arrs)
    alias, sizes = physical_chunks(plan, resolve_inplace(alg, inplace))
    fill = poison(dtype)
    phys = [[np.empty((int(sizes[r, b]), S), dtype=dtype) for b in range(3)] for r in range(g)]
    views = [[phys[r][int(alias[r, b, 0])][int(alias[r, b, 1]):] for b in range(3)]
             for r in range(g)]
    for r, a in enumerate(arrs):
        base, off = int(alias[r, BUF_I, 0]), int(alias[r, BUF_I, 1])
        n_in = int(cc[r, BUF_I])
        for b in range(3):
            if b == base:
                phys[r][b][:off] = fill
                phys[r][b][off + n_in:] = fill
            else:
                phys[r][b][:] = fill
        views[r][BUF_I][:n_in] = a.reshape(-1, S) if S else a.reshape(-1, 0)
    cg = call_geometry(alg.protocol, alg.nchunksperloop, S, dtype.itemsize, buffsize,
                       slice_elems)
    if cg.iterations:
        data = _NumpyData(plan, views, cg, ufunc)
        res = simulate(plan, cg.iterations, cg.max_allowed_count, cg.fifo_transfers, data=data)
        if not res.completed:
            raise MscclDeadlockError(
                f"{alg.name} deadlocked ({res.blocked} threadblocks stuck, {cg.iterations} "
                f"iterations of {cg.iter_elems} elements, {cg.max_allowed_count} chunks per "
                "transfer): " + "; ".join(str(w) for w in res.cycle))
    outs = []
    for r in range(g):
        out = views[r][BUF_O][:int(cc[r, BUF_O])].reshape(-1)
        if averages(alg.collective, op):
            out = finish_avg(out, g)
        outs.append(out)
    return outs
