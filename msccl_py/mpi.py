"""The seed's gloo-style collective library (``mpi.py``) on the communicator.

Code written for the seed (``../shared/seeds/nccl_in_500_locs_mpi.txt``)
runs after changing its import: the same module-level functions, argument
names, defaults and results per rank, but every call runs a library
program on the shared-memory runtime instead of pickles over pipes, so it
works at any world size and message size and fails cleanly.

* ``mpi_frame(f, world_size)`` runs ``f(rank, world_size, shared_mem,
  pipe_pairs)`` in one process per rank and returns the ranks' return values
  (the seed returns None). An exception, a dead rank or mismatched calls end
  every rank and raise here (:func:`msccl_py.launch` failures).
  ``shared_mem`` is a real ``multiprocessing.Value("i", 0)``; ``pipe_pairs``
  stands in for the seed's pipes, which do not exist here: indexing it raises.
* Reductions (``all_reduce``, ``reduce``, ``reduce_scatter``) take NumPy
  arrays of the communicator's dtypes, lists or tuples of numbers (reduced
  as int64 when every element is an int, else float64, and returned as the
  same container of Python numbers). ``op``: sum, max, min, prod, mean
  (sum / world_size with true division, as in the seed), any case.
* Data movement (``gather``, ``scatter``, ``broadcast``, ``all_gather``,
  ``all_to_all``) takes anything picklable, as the seed does; objects travel
  pickled in uint8 buffers through the library's programs, so element types
  and per-rank lengths are kept exactly.
* ``scatter`` is strided (rank i gets ``data[i::world_size]``); gather and
  all_gather concatenate in rank order (``np.concatenate(axis)`` for arrays,
  one flat container for lists); ``gather`` and ``reduce`` return None off
  the root.

Where the seed differs or is undefined (documented in docs/mpi.md):
``scatter`` and ``all_to_all`` raise :class:`~msccl_py.errors.SizeError`
when ``len(data)`` does not divide by the world size (the seed asserts);
``reduce_scatter(slice=False)`` returns the full reduction (the seed leaves
its ring's partial sums outside chunk ``(rank + 1) % world_size``); inputs
are never modified (the seed's reductions overwrite them).

>>> from msccl_py import mpi
>>> def work(rank, world_size, shared_mem, pipe_pairs):
...     mpi.init_env(rank, world_size, shared_mem, pipe_pairs)
...     return mpi.all_reduce([rank, 10 * rank], op="mean")
>>> mpi.mpi_frame(work, world_size=4)           # doctest: +SKIP
[[1.5, 15.0], [1.5, 15.0], [1.5, 15.0], [1.5, 15.0]]
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.runtime import process_group as pg
from msccl_py.comm.local import launch
from msccl_py.runtime.communicator import Communicator

__all__ = ["init_env", "get_rank", "get_world_size", "log_rank", "barrier", "gather", "scatter",
           "broadcast", "all_to_all", "all_gather", "reduce_scatter", "all_reduce", "reduce",
           "mpi_frame", "communicator", "OPS"]

#: the reduction ops; ``mean`` is a sum divided by the world size afterwards
OPS = ("sum", "max", "min", "prod", "mean")

_COMM: Communicator | None = None   # this rank's communicator, set inside mpi_frame
_HEADER = 8                         # bytes of the length prefix of a pickled frame
#: reductions up to this many bytes run on per-rank staging arrays: the runtime caches a
#: call's operand views by buffer identity, and the seed's calls bring new arrays each time
STAGE_BYTES = 1 << 18
_STAGES: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


class PipePairs:
    """The ``pipe_pairs`` argument of an mpi_frame function: there are no pipes here.

    The seed hands each rank a full mesh of ``multiprocessing.Pipe`` ends
    (world_size² file descriptors); msccl_py.mpi moves data through shared
    memory, so point-to-point use of the pipes fails with a clear error.
    """

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size

    def __getitem__(self, key):
        raise MscclRuntimeError(f"rank {self.rank}: pipe_pairs[{key!r}]: msccl_py.mpi has no "
                                "point-to-point pipes; use its collectives (gather, scatter, "
                                "broadcast, all_to_all, all_gather, reduce_scatter, all_reduce, "
                                "reduce, barrier)")

    def __repr__(self) -> str:
        return f"PipePairs(rank={self.rank}, world_size={self.world_size}, no pipes)"


# ----- environment ----------------------------------------------------------------------------
def _comm(what: str) -> Communicator:
    if _COMM is None:
        raise MscclRuntimeError(f"{what}: msccl_py.mpi collectives run only inside "
                                "mpi_frame(f, world_size), in the function f")
    return _COMM


def init_env(rank: int, world_size: int, shared_mem: Any = None, pipe_pairs: Any = None) -> None:
    """Check that ``f`` got this rank's arguments and set ``RANK``/``WORLD_SIZE`` as the seed does.

    >>> init_env(rank, world_size, shared_mem, pipe_pairs)     # doctest: +SKIP
    """
    comm = _comm("init_env")
    if (rank, world_size) != (comm.rank, comm.world_size):
        raise MscclRuntimeError(f"init_env(rank={rank!r}, world_size={world_size!r}) in the "
                                f"process of rank {comm.rank} of {comm.world_size}: pass the "
                                "rank and world_size mpi_frame gave f")
    os.environ["RANK"] = str(comm.rank)
    os.environ["WORLD_SIZE"] = str(comm.world_size)


def _env(name: str, value: int | None) -> int:
    if value is not None:
        return value
    text = os.environ.get(name)
    if text is None:
        raise MscclRuntimeError(f"get_{name.lower()}: not inside mpi_frame and ${name} is not "
                                "set")
    try:
        return int(text)
    except ValueError:
        raise MscclRuntimeError(f"${name}={text!r} is not an integer") from None


def get_rank() -> int:
    """This process's rank (``$RANK`` outside mpi_frame, like the seed)."""
    return _env("RANK", None if _COMM is None else _COMM.rank)


def get_world_size() -> int:
    """The number of ranks (``$WORLD_SIZE`` outside mpi_frame, like the seed)."""
    return _env("WORLD_SIZE", None if _COMM is None else _COMM.world_size)


def log_rank(*args: Any) -> None:
    """``print(*args)`` on rank 0 only."""
    if get_rank() == 0:
        print(*args)


def communicator() -> Communicator:
    """This rank's :class:`~msccl_py.runtime.communicator.Communicator` inside mpi_frame: which
    library program ran a call (``program()``, ``fallbacks``), or the array API with ``out=``.
    """
    return _comm("communicator")


def barrier() -> None:
    """Block until every rank has called barrier."""
    _comm("barrier").barrier()


# ----- pickled frames: any object through uint8 collectives -----------------------------------
def _pickle(objs: list, what: str) -> list[bytes]:
    try:
        return [pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL) for o in objs]
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise MscclRuntimeError(f"rank {get_rank()}: {what}: the data cannot be pickled: "
                                f"{exc}") from exc


def _need(blobs: list[bytes]) -> int:
    return _HEADER + max(len(b) for b in blobs)


def _rows(blobs: list[bytes], width: int) -> np.ndarray:
    """One row of ``width`` bytes per blob: length prefix, payload, zero padding."""
    rows = np.zeros((len(blobs), width), dtype=np.uint8)
    for row, blob in zip(rows, blobs):
        row[:_HEADER] = np.frombuffer(len(blob).to_bytes(_HEADER, "little"), dtype=np.uint8)
        row[_HEADER:_HEADER + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    return rows.reshape(-1)


def _unframe(row: np.ndarray, what: str, sender: int) -> Any:
    size = int.from_bytes(row[:_HEADER].tobytes(), "little")
    try:
        return pickle.loads(row[_HEADER:_HEADER + size].tobytes())
    except Exception as exc:   # whatever the sender's object raises while it is rebuilt
        raise MscclRuntimeError(f"rank {get_rank()}: {what}: the data from rank {sender} "
                                f"cannot be unpickled here: {type(exc).__name__}: {exc}") from exc


def _width(comm: Communicator, blobs: list[bytes]) -> int:
    """The widest row any rank needs: every rank must pass the same count."""
    need = np.array([_need(blobs)], dtype=np.int64)
    return int(_staged("width", need, 1, lambda x, out: comm.all_reduce(x, "max", out=out))[0])


def _concat(pieces: list, axis: int) -> Any:
    """Join per-rank pieces the seed's way: arrays along ``axis``, else one flat container."""
    if isinstance(pieces[0], np.ndarray):
        return np.concatenate(pieces, axis=axis)
    return type(pieces[0])([item for piece in pieces for item in piece])


def _split_check(data: Any, n: int, what: str, how: str) -> int:
    size = len(data)
    if size % n:
        raise SizeError(f"rank {get_rank()}: {what}: len(data) = {size} does not split into "
                        f"{n} equal {how} (one per rank)")
    return size


# ----- data movement ----------------------------------------------------------------------
def gather(data: Any, target_rank: int = 0) -> Any:
    """Every rank's ``data`` concatenated in rank order on ``target_rank``; None elsewhere.

    >>> gather([rank * 10 + i for i in range(2)])  # doctest: +SKIP
    [0, 1, 10, 11, 20, 21, 30, 31]
    """
    comm = _comm("gather")
    blobs = _pickle([data], "gather")
    width = _width(comm, blobs)
    got = comm.gather(_rows(blobs, width), root=target_rank)
    if got is None:
        return None
    got = got.reshape(comm.world_size, width)
    pieces = [data if r == comm.rank else _unframe(got[r], "gather", r)
              for r in range(comm.world_size)]
    return _concat(pieces, axis=-1)


def all_gather(data: Any, axis: int = -1) -> Any:
    """Every rank's ``data`` concatenated in rank order (along ``axis`` for arrays), everywhere.

    >>> all_gather(np.array([rank]))                # doctest: +SKIP
    array([0, 1, 2, 3])
    """
    comm = _comm("all_gather")
    blobs = _pickle([data], "all_gather")
    width = _width(comm, blobs)
    got = comm.all_gather(_rows(blobs, width)).reshape(comm.world_size, width)
    pieces = [data if r == comm.rank else _unframe(got[r], "all_gather", r)
              for r in range(comm.world_size)]
    return _concat(pieces, axis=axis)


def scatter(data: Any, source_rank: int = 0) -> Any:
    """Strided share ``data[rank::world_size]`` of ``source_rank``'s data (others pass anything).

    >>> scatter([0, 10, 20, 30] if rank == 0 else None)    # doctest: +SKIP
    [10]                                                     # on rank 1
    """
    comm = _comm("scatter")
    n = comm.world_size
    if comm.rank != source_rank:
        return _unframe(comm.scatter(None, root=source_rank), "scatter", source_rank)
    _split_check(data, n, "scatter", "strided shares data[i::world_size]")
    blobs = _pickle([data[i::n] for i in range(n)], "scatter")
    comm.scatter(_rows(blobs, _need(blobs)), root=source_rank)
    return data[comm.rank::n]


def broadcast(data: Any, source_rank: int = 0) -> Any:
    """``source_rank``'s ``data`` on every rank (the others' ``data`` is ignored).

    >>> broadcast([1, 2] if rank == 1 else None, source_rank=1)   # doctest: +SKIP
    [1, 2]
    """
    comm = _comm("broadcast")
    if comm.rank != source_rank:
        return _unframe(comm.broadcast(None, root=source_rank), "broadcast", source_rank)
    blobs = _pickle([data], "broadcast")
    comm.broadcast(_rows(blobs, _need(blobs)), root=source_rank)
    return data


def all_to_all(data: Any, axis: int = -1) -> Any:
    """Block j of ``data`` (``len(data) // world_size`` items) goes to rank j; received blocks
    are concatenated in rank order (along ``axis`` for arrays).

    >>> all_to_all([rank * 10 + x for x in range(4)])     # doctest: +SKIP
    [1, 11, 21, 31]                                        # on rank 1 of 4
    """
    comm = _comm("all_to_all")
    n, r = comm.world_size, comm.rank
    k = _split_check(data, n, "all_to_all", "blocks") // n
    blocks = [data[j * k:(j + 1) * k] for j in range(n)]
    blobs = _pickle(blocks, "all_to_all")
    width = _width(comm, blobs)
    got = comm.all_to_all(_rows(blobs, width)).reshape(n, width)
    pieces = [blocks[j] if j == r else _unframe(got[j], "all_to_all", j) for j in range(n)]
    return _concat(pieces, axis=axis)


# ----- reductions ----------------------------------------------------------------------------
def _numbers(data: Any, what: str) -> tuple[np.ndarray, Callable[[np.ndarray], Any]]:
    """``data`` as an array, and the function that turns a result back into ``data``'s type."""
    if isinstance(data, np.ndarray):
        return data, _same
    if isinstance(data, (list, tuple)):
        kind = type(data)
        try:
            arr = np.asarray(data)
        except (ValueError, OverflowError) as exc:
            raise MscclRuntimeError(f"rank {get_rank()}: {what}: cannot read the {kind.__name__} "
                                    f"as numbers: {exc}") from exc
        if arr.ndim != 1 or arr.dtype.kind not in "if" or \
                (arr.dtype.kind == "i" and arr.dtype != np.int64):
            raise MscclRuntimeError(f"rank {get_rank()}: {what}: a {kind.__name__} to reduce "
                                    "must hold ints or floats (int64 range), got "
                                    f"{_describe(data)}")
        return arr, lambda res: kind(res.tolist())
    raise MscclRuntimeError(f"rank {get_rank()}: {what} reduces a NumPy array, list or tuple, "
                            f"got {type(data).__name__}")


def _same(res: np.ndarray) -> np.ndarray:
    return res


def _describe(data: list | tuple) -> str:
    kinds = sorted({type(x).__name__ for x in data})
    return "elements of type " + ", ".join(kinds) if kinds else "nothing"


def _op(op: str, what: str) -> str:
    name = op.lower() if isinstance(op, str) else op
    if name not in OPS:
        raise MscclRuntimeError(f"rank {get_rank()}: {what}: unknown op {op!r}; use one of "
                                f"{', '.join(OPS)}")
    return name


def _staged(name: str, arr: np.ndarray, out_size: int, run: Callable) -> np.ndarray | None:
    """``run(x, out)`` on this rank's staging arrays for small calls (a copy of the result
    comes back), on ``arr`` itself for large ones."""
    if arr.nbytes > STAGE_BYTES:
        return run(arr, None)
    key = (name, arr.dtype.str, arr.size, out_size)
    stage = _STAGES.get(key)
    if stage is None:
        if len(_STAGES) >= 16:
            _STAGES.clear()
        stage = _STAGES[key] = (np.empty(arr.size, arr.dtype), np.empty(out_size, arr.dtype))
    np.copyto(stage[0], arr.reshape(-1))
    res = run(stage[0], stage[1])
    return None if res is None else res.copy()


def _finish(res: np.ndarray, op: str, n: int, back: Callable) -> Any:
    # the seed divides after summing (true division: int data gives floats)
    return back(res / n if op == "mean" else res)


def all_reduce(data: Any, op: str = "sum") -> Any:
    """Element-wise reduction of every rank's ``data``, on every rank.

    >>> all_reduce([rank, 1], op="max")             # doctest: +SKIP
    [3, 1]
    """
    comm = _comm("all_reduce")
    name = _op(op, "all_reduce")
    arr, back = _numbers(data, "all_reduce")
    red = "sum" if name == "mean" else name
    res = _staged("allreduce", arr, arr.size,
                  lambda x, out: comm.all_reduce(x, red, out=out)).reshape(arr.shape)
    return _finish(res, name, comm.world_size, back)


def reduce(data: Any, target_rank: int = 0, op: str = "sum") -> Any:
    """Element-wise reduction of every rank's ``data`` on ``target_rank``; None elsewhere.

    >>> reduce(np.ones(2), target_rank=0)           # doctest: +SKIP
    array([4., 4.])
    """
    comm = _comm("reduce")
    name = _op(op, "reduce")
    arr, back = _numbers(data, "reduce")
    red = "sum" if name == "mean" else name
    res = _staged("reduce", arr, arr.size,
                  lambda x, out: comm.reduce(x, target_rank, red, out=out))
    return None if res is None else _finish(res.reshape(arr.shape), name, comm.world_size, back)


def reduce_scatter(data: Any, op: str = "sum", slice: bool = False) -> Any:
    """With ``slice=True``: this rank's rows of the element-wise reduction; rows split into
    ``ceil(len(data) / world_size)`` per rank, so the last ranks may get fewer (as in the seed).
    With ``slice=False``: the whole reduction (see the module docstring).

    >>> reduce_scatter([rank * 10 + x for x in range(8)], slice=True)   # doctest: +SKIP
    [4, 44]                                                              # on rank 0 of 4
    """
    comm = _comm("reduce_scatter")
    name = _op(op, "reduce_scatter")
    arr, back = _numbers(data, "reduce_scatter")
    red = "sum" if name == "mean" else name
    n, r = comm.world_size, comm.rank
    if not slice or n == 1:
        res = _staged("allreduce", arr, arr.size, lambda x, out: comm.all_reduce(x, red, out=out))
        return _finish(res.reshape(arr.shape), name, n, back)
    if arr.ndim == 0:
        raise SizeError(f"rank {r}: reduce_scatter(slice=True) needs data with a length, got a "
                        "0-d array")
    rows = arr.shape[0]
    per = -(-rows // n)
    if per * n == rows:
        padded = arr
    else:
        padded = np.zeros((per * n,) + arr.shape[1:], dtype=arr.dtype)
        padded[:rows] = arr
    mine = _staged("reduce_scatter", padded, padded.size // n,
                   lambda x, out: comm.reduce_scatter(x, red, out=out))
    mine = mine.reshape((per,) + arr.shape[1:])
    keep = max(0, min(rows - r * per, per))
    return _finish(mine[:keep], name, n, back)


# ----- processes -------------------------------------------------------------------------------
def _run_rank(comm: Communicator, f: Callable, shared_mem: Any) -> Any:
    global _COMM
    _COMM = comm
    _STAGES.clear()
    try:
        return f(comm.rank, comm.world_size, shared_mem, PipePairs(comm.rank, comm.world_size))
    finally:
        _COMM = None
        _STAGES.clear()
        for stream in (sys.stdout, sys.stderr):   # f's prints appear before mpi_frame returns
            if stream is not None and not stream.closed:
                stream.flush()


def mpi_frame(f: Callable, world_size: int = 4, *, timeout: float | None = None,
              start_method: str | None = None, programs: str = "library") -> list:
    """Run ``f(rank, world_size, shared_mem, pipe_pairs)`` in ``world_size`` processes.

    Returns the ranks' return values in rank order. Raises
    :class:`~msccl_py.runtime.process_group.RankError` (with the rank's
    traceback) when ``f`` raises in any rank, and
    :class:`~msccl_py.errors.MscclRuntimeError` when a rank dies or the ranks'
    calls do not match; nothing is left running. ``timeout``, ``start_method``
    and ``programs`` are :func:`msccl_py.launch`'s.

    >>> mpi_frame(test_all_reduce, world_size=4)    # doctest: +SKIP
    """
    method = start_method or pg.default_start_method()
    try:
        shared_mem = mp.get_context(method).Value("i", 0)
    except ValueError as exc:
        raise MscclRuntimeError(f"unknown start method {method!r}") from exc
    if method == "fork" and programs != "builtin":
        # load the program registry once here: forked ranks share it instead of each
        # importing every program (about 0.7 s of CPU per rank)
        from msccl_py import library
        library.programs()
    return launch(_run_rank, world_size, args=(f, shared_mem), timeout=timeout,
                  start_method=method, programs=programs)
