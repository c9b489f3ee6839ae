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
from msccl_py.errors import MscclRuntimeError

OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
       "avg": np.add}
REDUCING = frozenset({"allreduce", "reduce_scatter", "reduce"})


def reduction(op: str):
    """The NumPy ufunc of reduction ``op`` (``avg`` folds with add)."""
    try:
        return OPS[op]
    except KeyError:
        raise MscclRuntimeError(f"unknown reduction op {op!r}; choose one of "
                                f"{', '.join(OPS)}") from None


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
        raise MscclRuntimeError(f"{coll} on {g} ranks needs {g} inputs, got {len(inputs)}")
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
                            f"(algorithm {alg.name}); nchunksperloop={n}")
