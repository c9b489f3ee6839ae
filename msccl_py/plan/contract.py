"""The runtime contract: what every executor of a plan agrees on around a call.

Every executor (the NumPy reference runtime, the shm runtime and its native
executor, the CuPy runtime and its host emulation, the MSCCL++ plan runtimes,
the communicators) takes these from here, so that a call one of them refuses
the others refuse too, with the same exception type:

* **tables**: the reductions (:data:`OPS`, their NumPy ufuncs), the dtypes by
  name (:data:`DTYPES`), the codes a call descriptor carries between ranks
  (:data:`CALL_COLLECTIVES`, :data:`CALL_DTYPES`) and the subset each backend
  runs (:data:`BACKENDS`);
* **admission** (:func:`admit`): the verifier's static rules and matched
  connections, checked before an algorithm runs;
* **call layout**: the in-place default (:func:`default_inplace`,
  :func:`resolve_inplace`) and the chunk size a call's inputs give
  (:func:`chunk_elems`).

Errors, one type per kind of bad input: a bad input shape (the wrong number of
inputs, a length that does not divide into the chunks or disagrees between
ranks) is a :class:`~msccl_py.errors.SizeError`; an op or dtype the backend
does not run, mixed dtypes, or a call the algorithm does not declare (in-place
or out-of-place) is a :class:`~msccl_py.errors.MscclRuntimeError`.

>>> BACKENDS["shm-native"].ops, BACKENDS["cupy"].dtypes[:3]
(('sum', 'prod', 'max', 'min'), ('float16', 'bfloat16', 'float32'))
>>> describe_call((CALL_COLLECTIVES.index("allreduce"), 1024, 1, 0, 0, 0xab, 0))
'allreduce(count=1024, dtype=float32, op=sum, program#ab)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from msccl_py import collective_table, ir
from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.plan.connections import check_connections
from msccl_py.plan.static import check_algorithm, check_threadblocks
from msccl_py.plan.tables import BUF_I, Plan

# ----------------------------------------------------------------------------- tables

#: the reductions a call may ask for, with the NumPy ufunc that folds two values;
#: ``avg`` folds as a sum and the result is divided by the rank count afterwards
REDUCTIONS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
              "avg": np.add}
OPS = tuple(REDUCTIONS)
#: collectives whose ``avg`` divides the output (the others move data without reducing)
REDUCING = collective_table.REDUCING

#: dtypes by the name runtimes and the CLI use (bfloat16 where ml_dtypes is installed)
DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64,
          "int32": np.int32, "int64": np.int64, "uint8": np.uint8}
try:
    import ml_dtypes as _ml

    DTYPES["bfloat16"] = _ml.bfloat16
except ImportError:  # pragma: no cover - depends on the environment
    pass

#: a call descriptor (what a rank tells its peers it is calling) stores the index of its
#: collective, dtype and op in these tables; ``run`` is a call of one whole algorithm
CALL_COLLECTIVES = ("barrier", *collective_table.NAMES, "run")
CALL_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8", "int8", "int16",
               "uint16", "uint32", "uint64", "bfloat16")


@dataclass(frozen=True)
class Backend:
    """One backend's registration: what it runs and where its code is.

    ``dtypes`` (in its own code order where it has codes), ``ops``,
    ``collectives``; ``processes``: ``"one"`` (a call runs in this process,
    ranks as threads or streams) or ``"per-rank"``; ``devices``: ``"cpu"`` or
    ``"gpu"``. ``run`` and ``launch`` name its code as ``module:function``,
    imported on use by :mod:`msccl_py.runtime.backends` (an executor table
    that nothing calls by name has neither).
    """

    name: str
    dtypes: tuple[str, ...]
    ops: tuple[str, ...]
    #: ``run(alg, inputs, op=..., inplace=..., dtype=...)``: one call of an algorithm
    run: str = ""
    #: ``launch(fn, world_size, args=..., **options)``: communicators in rank processes
    launch: str = ""
    collectives: frozenset[str] = frozenset(collective_table.NAMES)
    processes: str = "one"
    devices: str = "cpu"


#: the dtypes the CPU runtimes move (the native shm executor's code order)
_CPU_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8")
#: the reductions compiled code runs; ``avg`` runs as ``sum`` there and the host divides
_DEVICE_OPS = ("sum", "prod", "max", "min")

#: the one backend registry: a new backend is its module plus one entry here
BACKENDS: dict[str, Backend] = {
    "reference": Backend("reference", tuple(DTYPES), OPS, run="msccl_py.runtime.reference:run"),
    "shm": Backend("shm", _CPU_DTYPES, OPS, run="msccl_py.runtime.shm:run",
                   launch="msccl_py.runtime.communicator:launch", processes="per-rank"),
    # native/shm_exec.cpp and plan_exec.cpp: their dtype and op codes are these indices
    # and the communicator's calls on them: int8, and bfloat16 as 2-byte bit patterns
    "shm-native": Backend("shm-native", (*_CPU_DTYPES, "int8", "bfloat16"), _DEVICE_OPS),
    # the GPU interpreter (runtime/cupy/kernel): its dtype and op codes are these indices
    "cupy": Backend("cupy", ("float16", "bfloat16", "float32", "float64", "int32", "int64",
                             "uint8"), _DEVICE_OPS, run="msccl_py.runtime.cupy:run",
                    launch="msccl_py.runtime.cupy.ipc:launch", devices="gpu"),
    # the GPU interpreter compiled for the host, one thread per threadblock
    "emulated": Backend("emulated", ("float16", "bfloat16", "float32", "float64", "int32",
                                     "int64", "uint8"), OPS,
                        run="msccl_py.runtime.cupy.emulation:emulated_run"),
    # the MSCCL++ executor has no average
    "mscclpp": Backend("mscclpp", tuple(DTYPES), _DEVICE_OPS),
}


def apply_avg(out: np.ndarray, ranks: int) -> None:
    """The one average rule: a sum becomes an average in place, after the last reduction.

    Every runtime applies it to a call of a :data:`REDUCING` collective with
    ``op="avg"``: floats divide, integers truncate toward zero (like NCCL).
    """
    if out.dtype.kind in "iu":
        q = np.abs(out.astype(np.int64)) // ranks
        np.copyto(out, np.where(out < 0, -q, q), casting="unsafe")
    else:
        np.divide(out, out.dtype.type(ranks), out=out)


def averages(collective: str, op: str) -> bool:
    """Whether a call's result is divided by the rank count (:func:`apply_avg`)."""
    return op == "avg" and collective in REDUCING


def reduction(op: str):
    """The NumPy ufunc of reduction ``op`` (``avg`` folds with add).

    >>> reduction("max").__name__
    'maximum'
    """
    try:
        return REDUCTIONS[op]
    except KeyError:
        raise MscclRuntimeError(f"unknown reduction op {op!r}; choose one of "
                                f"{', '.join(OPS)}") from None


def device_op_code(op: str) -> int:
    """The code compiled executors take for ``op`` (``avg`` runs as ``sum``).

    >>> device_op_code("min"), device_op_code("avg")
    (3, 0)
    """
    return _DEVICE_OPS.index("sum" if op == "avg" else op)


def dtype_of(name: str) -> np.dtype:
    """The NumPy dtype of a runtime dtype name."""
    try:
        return np.dtype(DTYPES[name])
    except KeyError:
        raise MscclRuntimeError(f"unsupported dtype {name!r}; choose one of "
                                f"{', '.join(DTYPES)}") from None


def describe_call(desc: tuple[int, ...]) -> str:
    """Human text of a call descriptor's seven ints (every mismatch message uses it)."""
    coll, count, dtype, op, root, program = (int(v) for v in desc[:6])
    name = (CALL_COLLECTIVES[coll] if 0 <= coll < len(CALL_COLLECTIVES)
            else f"collective#{coll}")
    if name == "barrier":
        return "barrier()"
    parts = [f"count={count}",
             f"dtype={CALL_DTYPES[dtype] if 0 <= dtype < len(CALL_DTYPES) else dtype}"]
    if name in REDUCING or name == "run":
        parts.append(f"op={OPS[op] if 0 <= op < len(OPS) else op}")
    if name in collective_table.ROOTED:
        parts.append(f"root={root}")
    parts.append(f"program#{program:x}")
    return f"{name}({', '.join(parts)})"


# ----------------------------------------------------------------------------- admission

def admit(alg: ir.Algorithm, plan: Plan) -> None:
    """Refuse an algorithm the verifier's static rules or connection matching reject.

    Every runtime runs this before a call, so they reject the same algorithms
    with the same message (:class:`MscclRuntimeError` naming the first problem).
    """
    problems = check_algorithm(alg) + check_threadblocks(alg)
    problems = problems or check_connections(plan)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise MscclRuntimeError(f"cannot run {alg.name}: {problems[0]}{more}")


# ----------------------------------------------------------------------------- call layout

def default_inplace(alg: ir.Algorithm) -> bool:
    """In place when the algorithm is declared in-place only, else out of place."""
    return bool(alg.inplace and not alg.outofplace)


def resolve_inplace(alg: ir.Algorithm, inplace: bool | None) -> bool:
    """``inplace``, or :func:`default_inplace`; refused when the algorithm does not declare it."""
    if inplace is None:
        inplace = default_inplace(alg)
    if inplace and not alg.inplace:
        raise MscclRuntimeError(f"{alg.name} is not declared in-place (inplace=0)")
    if not inplace and not alg.outofplace:
        raise MscclRuntimeError(f"{alg.name} is not declared out-of-place (outofplace=0)")
    return bool(inplace)


def physical_chunks(plan: Plan, inplace: bool) -> tuple[np.ndarray, np.ndarray]:
    """A call's buffer aliasing and the chunks each physical buffer must hold.

    Returns ``(alias, chunks)``: ``alias[r, b]`` is (physical buffer, chunk
    offset) where logical buffer ``b`` of rank ``r`` starts (an in-place call
    puts the output over the input), and ``chunks[r, p]`` covers every logical
    buffer placed in physical buffer ``p``, at its call size or the plan's,
    whichever is larger.
    """
    cc = plan.call_chunks
    alias = plan.aliases(inplace)
    chunks = np.zeros((plan.ngpus, 3), dtype=np.int64)
    for r in range(plan.ngpus):
        for b in range(3):
            base, off = alias[r, b]
            chunks[r, base] = max(chunks[r, base], off + max(cc[r, b], plan.chunks[r, b]))
    return alias, chunks


def check_inputs(alg: ir.Algorithm, inputs: Sequence) -> None:
    """One input per rank, all of one dtype (NumPy-like arrays: only ``dtype`` is read)."""
    if len(inputs) != alg.ngpus:
        raise SizeError(f"{alg.name} runs on {alg.ngpus} ranks but got {len(inputs)} inputs")
    if any(a.dtype != inputs[0].dtype for a in inputs):
        raise MscclRuntimeError("inputs must share one dtype, got "
                                f"{sorted({str(a.dtype) for a in inputs})}")


def chunk_elems(alg: ir.Algorithm, call_chunks: np.ndarray, inputs: Sequence) -> int:
    """S, the elements per chunk of a call: the first rank with input chunks gives it.

    Every rank's input must be 1-D with its own input chunks times S elements
    (none on a rank without input chunks). ``call_chunks`` is the plan's
    (ranks, 3) chunk table of the call's buffers.
    """
    first = next((r for r in range(len(inputs)) if call_chunks[r, BUF_I]), None)
    if first is None:
        raise SizeError(f"{alg.name}: no rank has input chunks to size the call by")
    ic = int(call_chunks[first, BUF_I])
    size = inputs[first].size
    if size % ic:
        raise SizeError(f"rank {first} input has {size} elements, not a multiple of its "
                        f"{ic} input chunks")
    S = size // ic
    for r, a in enumerate(inputs):
        n = int(call_chunks[r, BUF_I])
        if a.ndim != 1 or a.size != n * S:
            raise SizeError(f"rank {r} input must be 1-D with {n * S} elements ({n} chunks "
                            f"of {S}), got shape {a.shape}")
    return S
