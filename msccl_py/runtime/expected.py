"""The correct result of a collective, computed with plain NumPy, for checking runtimes.

Inputs are each rank's input array as the runtimes take them (see
:mod:`msccl_py.runtime.reference`); the result is each rank's expected
output, ``None`` where the collective leaves a rank's output unspecified
(non-root ranks of ``reduce`` and ``gather``). ``avg`` is sum then divide by the number of
ranks (truncating toward zero for integer types, as NCCL does).

>>> import numpy as np
>>> from msccl_py import ir
>>> alg = ir.Algorithm("ag", "allgather", "Simple", False, 2, 2, 1)
>>> expected(alg, [np.array([1, 2]), np.array([3, 4])])[1].tolist()
[1, 2, 3, 4]
"""

from __future__ import annotations

import numpy as np

from msccl_py import ir
from msccl_py.collective_table import KINDS, fold_with
from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.plan.contract import apply_avg, averages, reduction



def finish_avg(values: np.ndarray, nranks: int) -> np.ndarray:
    """A copy of sum ``values`` divided by ``nranks`` (:func:`msccl_py.plan.contract.apply_avg`)."""
    out = values.copy()
    apply_avg(out, nranks)
    return out


def expected(alg: ir.Algorithm, inputs: list[np.ndarray], op: str = "sum",
             root: int = 0) -> list[np.ndarray | None]:
    """Each rank's correct output for ``alg.collective`` applied to ``inputs``."""
    n, g = alg.nchunksperloop, alg.ngpus
    coll = alg.collective
    if len(inputs) != g:
        raise SizeError(f"{coll} on {g} ranks needs {g} inputs, got {len(inputs)}")
    ufunc = reduction(op)
    arrs = [np.asarray(x).reshape(-1) for x in inputs]
    found = KINDS.get(coll)
    if found is None or found.expected is None:
        raise MscclRuntimeError(f"no NumPy reference result for collective {coll!r} "
                                f"(algorithm {alg.name}); nchunksperloop={n}; run the program "
                                f"file instead (msccl-py run PROGRAM.py ARGS), whose own "
                                f"result is then the reference")
    fold = fold_with(ufunc)
    if averages(coll, op):
        fold = (lambda total: lambda parts: finish_avg(total(parts), g))(fold)
    return found.expected(arrs, g, root, fold)


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
    fold = fold_with(reduction(op))
    dtype = arrs[0].dtype
    want = [np.zeros(int(cc[r, 1]) * S, dtype=dtype) for r in range(alg.ngpus)]
    mask = [np.zeros(int(cc[r, 1]) * S, dtype=bool) for r in range(alg.ngpus)]
    for (rank, buf, idx), parts in postcondition.items():
        if buf != "o":
            continue
        pieces = [arrs[q][k * S:(k + 1) * S] for q, k in parts]
        # avg divides only the built-in reducing collectives' results (as every
        # runtime does); on a custom collective it is the sum
        value = fold(pieces)
        want[rank][idx * S:(idx + 1) * S] = value
        mask[rank][idx * S:(idx + 1) * S] = True
    return want, mask
