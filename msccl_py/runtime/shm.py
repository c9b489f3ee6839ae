"""The multi-process shared-memory runtime: MSCCL XML executed by one OS process per rank.

:func:`run` executes one collective of an ``ir.Algorithm`` (callers read XML
files; the runtime reads none) over per-rank NumPy arrays and returns
per-rank outputs. The rank
processes, their shared arena and their compiled per-rank programs stay alive
in a pool between calls, so repeated calls pay neither start-up nor plan
building; inputs and outputs travel through per-rank shared data regions, not
pickles. Execution follows MSCCL's semantics (pipelined slices, bounded
FIFOs per channel and peer, dependency flags); see :mod:`.shm_exec` and its
compiled twin :mod:`.shm_native`. Output and scratch start with the
reference runtime's poison (NaN, or a fixed integer), as there.

The FIFO size is ``buffsize`` bytes per connection (default
:data:`~msccl_py.runtime.process_group.DEFAULT_BUFFSIZE`, 1 MiB: smaller than
NCCL's 4 MiB so that FIFOs stay in cache, large enough that each Python step
moves a lot of data). Slices, transfers and FIFO capacity follow
:mod:`msccl_py.plan.geometry` at that size, so a program's size-dependent
deadlock regimes are the ones the verifier reports for the same ``buffsize``.

This is the backend of ``msccl-py run --backend shm``.

>>> import numpy as np
>>> from msccl_py.runtime import shm_fallback
>>> alg = shm_fallback.allreduce_ring(4)
>>> outs = run(alg, [np.full(8, r, dtype=np.int32) for r in range(4)])  # doctest: +SKIP
>>> outs[0].tolist()                                                      # doctest: +SKIP
[6, 6, 6, 6, 6, 6, 6, 6]
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime import process_group as pg
from msccl_py.runtime.reference import poison
from msccl_py.plan.contract import (BACKENDS, OPS, apply_avg, averages, check_inputs,
                                    chunk_elems, default_inplace)
from msccl_py.plan.contract import CALL_COLLECTIVES as COLLECTIVES
from msccl_py.plan.contract import CALL_DTYPES as DTYPES
from msccl_py.runtime.shm_program import call_chunks, check_plan, rank_program

#: dtypes the runtime accepts (the contract's shm backend)
SUPPORTED_DTYPES = BACKENDS["shm"].dtypes
_MAX_POOLS = 2


def placement(chunks: tuple[int, int, int], rank: int, S: int,
              inplace: bool) -> tuple[tuple[int, int], tuple[int, int]]:
    """Where rank's input and output live: ``((region, offset), (region, offset))``.

    Region 0 is the rank's input data region, 1 its output region (element
    offsets). In place, the smaller buffer is a window of the larger one at
    ``rank * its size`` (allgather/gather, reduce_scatter/scatter) or both
    are the same (equal sizes), as :mod:`msccl_py.collective_table` says.

    >>> placement((1, 4, 0), rank=2, S=10, inplace=True)
    ((1, 20), (1, 0))
    """
    i_ch, o_ch = chunks[0], chunks[1]
    if not inplace:
        return (0, 0), (1, 0)
    if i_ch == o_ch:
        return (1, 0), (1, 0)
    if o_ch > i_ch:
        return (1, rank * i_ch * S), (1, 0)
    return (0, 0), (0, rank * o_ch * S)


def _serve(rt, conn) -> str:
    """A pool rank: execute ``run`` commands until told to exit."""
    programs: dict[int, object] = {}
    views: dict[tuple, np.ndarray] = {}
    while True:
        msg = conn.recv()
        if msg[0] == "exit":
            return pg.QUIET
        _, key, blob, S, dtype_str, op, inplace, timeout = msg
        if blob is not None:
            programs[key] = rank_program(pickle.loads(blob), rt.rank, rt.world_size)
        prog = programs[key]
        dtype = np.dtype(dtype_str)
        rt.timeout = timeout
        (ir_, io), (or_, oo) = placement(prog.chunks, rt.rank, S, inplace)
        i_el, o_el, s_el = (c * S for c in prog.chunks)
        vkey = (dtype.str, ir_, io, i_el, or_, oo, o_el)
        bufs = views.get(vkey)
        if bufs is None:
            if len(views) > 16:
                views.clear()
            whole = rt.arena.layout.data_stride // dtype.itemsize
            region = [rt.arena.data_view(rt.rank, 0, dtype, whole),
                      rt.arena.data_view(rt.rank, 1, dtype, whole)]
            bufs = views[vkey] = [region[ir_][io:io + i_el], region[or_][oo:oo + o_el]]
        scratch = rt.scratch(dtype, s_el)
        scratch.fill(poison(dtype))
        rt.enter((COLLECTIVES.index("run"), S, DTYPES.index(dtype.name), OPS.index(op), 0,
                  key, 0))
        rt.execute(prog, [bufs[0], bufs[1], scratch], S, dtype, op)
        rt.leave()
        conn.send(("ok", None))


class _Pool:
    """A process group of ``world_size`` servers plus what they have already compiled."""

    def __init__(self, world_size: int, start_method: str | None, buffsize: int,
                 data_bytes: int):
        self.group = pg.ProcessGroup(world_size, start_method=start_method, buffsize=buffsize,
                                     data_bytes=data_bytes)
        self.group.start(_serve)
        self.known: set[int] = set()
        self.data_bytes = self.group.layout.data_stride

    def close(self) -> None:
        self.group.close()


_pools = pg.RankPools(_Pool, limit=_MAX_POOLS)


def close() -> None:
    """Stop every pooled rank process (they restart on the next :func:`run`)."""
    _pools.close()


def _pool(world_size: int, start_method: str | None, buffsize: int, nbytes: int) -> _Pool:
    key = (world_size, start_method or pg.default_start_method(), buffsize)
    return _pools.pool(key, nbytes, world_size, start_method, buffsize)


def run(algorithm: ir.Algorithm, inputs: Sequence[np.ndarray],
        op: str = "sum", *, inplace: bool | None = None, timeout: float | None = None,
        buffsize: int | None = None, start_method: str | None = None) -> list[np.ndarray]:
    """Run one collective of ``algorithm`` over ``inputs`` (one array per rank) on CPU processes.

    ``op``: sum, prod, max, min or avg. ``inplace``: run with the in-place
    aliasing (default: out of place when the algorithm allows it).
    ``timeout``: seconds without progress before
    :class:`~msccl_py.errors.MscclDeadlockError` (with every rank's wait
    report). Returns new arrays, one per rank, each of the rank's output
    chunk count times S elements.

    >>> import numpy as np
    >>> from msccl_py.runtime.shm_fallback import allgather_ring
    >>> run(allgather_ring(2), [np.array([1.0]), np.array([2.0])])[1]   # doctest: +SKIP
    array([1., 2.])
    """
    if not isinstance(algorithm, ir.Algorithm):   # the runtime reads no files
        raise MscclRuntimeError(f"shm.run takes an ir.Algorithm, not {type(algorithm).__name__}; "
                                "read an XML file with msccl_py.targets.msccl.read_xml first")
    alg = algorithm
    table = call_chunks(alg, check_plan(alg))
    chunks = [tuple(int(c) for c in row) for row in table]
    n = alg.ngpus
    arrays = [np.ascontiguousarray(x).reshape(-1) for x in inputs]
    check_inputs(alg, arrays)
    if op not in OPS:
        raise MscclRuntimeError(f"unknown reduction op {op!r}; use one of {', '.join(OPS)}")
    dtype = arrays[0].dtype
    if dtype.name not in SUPPORTED_DTYPES:
        raise MscclRuntimeError(f"dtype {dtype} is not supported; use one of "
                                f"{', '.join(SUPPORTED_DTYPES)}")
    S = chunk_elems(alg, np.asarray(table), arrays)
    if inplace is None:
        inplace = default_inplace(alg)
    most = max(max(c[0], c[1]) for c in chunks) * S * dtype.itemsize
    pool = _pool(n, start_method, int(buffsize or pg.DEFAULT_BUFFSIZE), most)
    group = pool.group
    blob, key = pg.plan_key(alg)
    send_blob = None if key in pool.known else blob
    outs = []
    fill = poison(dtype)
    for r in range(n):
        (ireg, ioff), (oreg, ooff) = placement(chunks[r], r, S, inplace)
        # unwritten output reads as the reference runtime's poison, not as a lucky 0
        group.arena.data_view(r, oreg, dtype, ooff + chunks[r][1] * S)[ooff:] = fill
        if chunks[r][0]:
            dst = group.arena.data_view(r, ireg, dtype, ioff + arrays[r].size)
            np.copyto(dst[ioff:], arrays[r])
    for r in range(n):
        group.send(r, ("run", key, send_blob, S, dtype.str, op, bool(inplace),
                       float(timeout or group.timeout)))
    pg.wait_or_drop(group, pool, _pools)
    pool.known.add(key)
    divide = averages(alg.collective, op)
    for r in range(n):
        _, (oreg, ooff) = placement(chunks[r], r, S, inplace)
        count = chunks[r][1] * S
        out = group.arena.data_view(r, oreg, dtype, ooff + count)[ooff:].copy()
        if divide:
            apply_avg(out, n)
        outs.append(out)
    return outs
