"""Run MSCCL++ plans on real data: the reference (NumPy, one process) and shm (one process per rank) backends.

Both take a plan, one input array per rank and a reduction, and return each
rank's output array; a plan that stops making progress raises
:class:`~msccl_py.errors.MscclDeadlockError` naming what each blocked
threadblock waits on.

>>> import numpy as np
>>> from msccl_py.runtime.shm_fallback import allgather_ring
>>> from msccl_py.targets.mscclpp.emit import lower
>>> ins = [np.arange(4, dtype=np.int32), np.arange(4, 8, dtype=np.int32)]
>>> run_reference(lower(allgather_ring(2)), ins, op="max")[1].tolist()
[0, 1, 2, 3, 4, 5, 6, 7]
"""

from __future__ import annotations

import numpy as np

from msccl_py.errors import MscclDeadlockError, MscclRuntimeError, SizeError
from msccl_py.plan.mscclpp.execute import execute
from msccl_py.mscclpp_ir import Plan
from msccl_py.plan.contract import BACKENDS, REDUCTIONS

#: the XML runtimes' reductions but average, which the MSCCL++ executor does not run
REDUCE_OPS = BACKENDS["mscclpp"].ops


def reduce_op(op: str):
    """The NumPy ufunc of reduction ``op``; the executor has no average."""
    if op not in REDUCE_OPS:
        raise MscclRuntimeError(f"reduction {op!r} is not one the MSCCL++ executor runs; choose "
                                f"{', '.join(REDUCE_OPS)}")
    return REDUCTIONS[op]


def input_elems(plan: Plan, nbytes: int, itemsize: int) -> list[int]:
    """Elements of each rank's input for a call of ``nbytes``."""
    from msccl_py.plan.mscclpp.geometry import geometry
    return [s["i"] // itemsize for s in geometry(plan, nbytes).sizes]


def run_reference(plan: Plan, inputs: list[np.ndarray], op: str = "sum") -> list[np.ndarray]:
    """Each rank's output after running ``plan`` once in this process."""
    nbytes = message_bytes(plan, inputs)
    res = execute(plan, nbytes, [np.ascontiguousarray(x) for x in inputs], reduce_op(op), track=False)
    if res.invalid:
        raise MscclRuntimeError(res.invalid[0])
    if res.deadlocks:
        raise MscclDeadlockError("; ".join(res.deadlocks))
    return res.outputs


def message_bytes(plan: Plan, inputs: list[np.ndarray]) -> int:
    """The call's message size as the executor counts it, from the inputs (output size for allgather)."""
    if len(inputs) != plan.nranks:
        raise SizeError(f"{plan.name} runs on {plan.nranks} ranks but got {len(inputs)} inputs")
    g = plan.gpus[0]
    nbytes = inputs[0].nbytes
    if plan.collective == "allgather" and g.input_chunks:
        nbytes = nbytes // g.input_chunks * g.output_chunks
    elif not g.input_chunks:
        raise SizeError(f"{plan.name}: rank 0 has no input chunks to size the call by")
    return nbytes
