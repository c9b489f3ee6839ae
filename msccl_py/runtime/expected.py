"""The correct result of a collective, computed with plain NumPy, for checking runtimes.

Inputs are each rank's input array as the runtimes take them (see
:mod:`msccl_py.runtime.reference`); the result is each rank's expected
output, ``None`` where the collective leaves a rank's output unspecified
(non-root ranks of ``reduce`` and ``gather``). ``avg`` is sum then divide by the number of
ranks (truncating for integer types), as DESIGN.md specifies.

>>> import numpy as np
>>> from msccl_py import ir
>>> alg = ir.Algorithm("ag", "allgather", "Simple", False, 2, 2, 1)
>>> expected(alg, [np.array([1, 2]), np.array([3, 4])])[1].tolist()
[1, 2, 3, 4]
"""

from __future__ import annotations

from functools import reduce as _fold

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.plan.contract import reduction



def finish_avg(values: np.ndarray, nranks: int) -> np.ndarray:
    """Divide a sum by ``nranks``: true division for floats, truncation for integers."""
    if np.issubdtype(values.dtype, np.integer):
        return (np.trunc(values.astype(np.float64) / nranks)).astype(values.dtype)
    return (values / values.dtype.type(nranks)).astype(values.dtype)


def expected(alg: ir.Algorithm, inputs: list[np.ndarray], op: str = "sum",
             root: int = 0) -> list[np.ndarray | None]:
    """Each rank's correct output for ``alg.collective`` applied to ``inputs``."""
    n, g = alg.nchunksperloop, alg.ngpus
    coll = alg.collective
    if len(inputs) != g:
        raise SizeError(f"{coll} on {g} ranks needs {g} inputs, got {len(inputs)}")
    ufunc = reduction(op)
    arrs = [np.asarray(x).reshape(-1) for x in inputs]

    def fold(parts):
        out = _fold(lambda a, b: ufunc(a, b), parts[1:], parts[0].copy())
        return finish_avg(out, g) if op == "avg" else out

    if coll == "allreduce":
        total = fold(arrs)
        return [total.copy() for _ in range(g)]
    if coll == "allgather":
        whole = np.concatenate(arrs)
        return [whole.copy() for _ in range(g)]
    if coll == "reduce_scatter":
        total = fold(arrs)
        block = total.size // g
        return [total[r * block:(r + 1) * block].copy() for r in range(g)]
    if coll == "alltoall":
        block = arrs[0].size // g
        return [np.concatenate([arrs[s][r * block:(r + 1) * block] for s in range(g)])
                for r in range(g)]
    if coll == "broadcast":
        return [arrs[root].copy() for _ in range(g)]
    if coll == "reduce":
        total = fold(arrs)
        return [total if r == root else None for r in range(g)]
    if coll == "gather":
        whole = np.concatenate(arrs)
        return [whole if r == root else None for r in range(g)]
    if coll == "scatter":
        block = arrs[root].size // g
        return [arrs[root][r * block:(r + 1) * block].copy() for r in range(g)]
    raise MscclRuntimeError(f"no NumPy reference result for collective {coll!r} "
                            f"(algorithm {alg.name}); nchunksperloop={n}; run the program "
                            f"file instead (msccl-py run PROGRAM.py ARGS), whose own "
                            f"result is then the reference")


def expected_from_postcondition(alg: ir.Algorithm, inputs: list[np.ndarray], op: str,
                                postcondition: dict) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Correct outputs and a mask of the chunks ``postcondition`` constrains.

    ``postcondition`` maps ``(rank, "o", chunk)`` to the ``(origin rank, origin
    chunk)`` pairs reduced into it (``MSCCLProgram.postcondition()``), which is
    how a custom collective says what it computes.

    >>> from msccl_py import ir
    >>> alg = ir.Algorithm("swap", "custom", "Simple", False, 2, 1, 1,
    ...                    [ir.Gpu(0, 1, 1), ir.Gpu(1, 1, 1)])
    >>> want, mask = expected_from_postcondition(
    ...     alg, [np.array([1, 2]), np.array([3, 4])], "sum", {(0, "o", 0): [(1, 0)]})
    >>> want[0].tolist(), mask[0].tolist(), mask[1].tolist()
    ([3, 4], [True, True], [False, False])
    """
    from msccl_py.plan.tables import plan_for
    cc = plan_for(alg).call_chunks
    arrs = [np.asarray(x).reshape(-1) for x in inputs]
    per = [a.size // int(cc[r, 0]) for r, a in enumerate(arrs) if int(cc[r, 0])]
    if not per:
        raise MscclRuntimeError(f"{alg.name}: no rank has input chunks")
    S = per[0]
    ufunc = reduction(op)
    dtype = arrs[0].dtype
    want = [np.zeros(int(cc[r, 1]) * S, dtype=dtype) for r in range(alg.ngpus)]
    mask = [np.zeros(int(cc[r, 1]) * S, dtype=bool) for r in range(alg.ngpus)]
    for (rank, buf, idx), parts in postcondition.items():
        if buf != "o":
            continue
        pieces = [arrs[q][k * S:(k + 1) * S] for q, k in parts]
        # avg divides only the built-in reducing collectives' results (as every
        # runtime does); on a custom collective it is the sum
        value = _fold(lambda a, b: ufunc(a, b), pieces[1:], pieces[0].copy())
        want[rank][idx * S:(idx + 1) * S] = value
        mask[rank][idx * S:(idx + 1) * S] = True
    return want, mask
