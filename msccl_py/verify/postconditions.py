"""Initial buffers and expected outputs of each collective, as symbolic values.

Chunk conventions (DESIGN.md): input chunk ``k`` of rank ``r`` holds (r, k).
With ``n = nchunksperloop`` and ``g = ngpus``:

* allreduce: output chunk k of every rank = sum over ranks s of (s, k)
* allgather: output chunk ``s*ic + k`` = (s, k), ``ic = n/g``
* reduce_scatter: output chunk k of rank r = sum over s of (s, r*oc + k), ``oc = n/g``
* alltoall: output chunk ``s*m + k`` of rank r = (s, r*m + k), ``m = n/g``
* broadcast: output chunk k of every rank = (root, k)
* reduce: output chunk k of the root = sum over s of (s, k); other outputs free

MSCCL XML has no root attribute, so broadcast and reduce assume ``root=0``
unless told otherwise. A custom collective needs a postcondition: a mapping
``{(rank, index): expected}`` (output buffer) or ``{(rank, buffer, index):
expected}``, a callable ``(rank, index) -> expected or None``, or a
Collective-like object (``init_buffers()`` for the inputs and ``check(prog)``
for the outputs, used without importing :mod:`msccl_py.language`). An
expected value is a Chunk-like object (``origin_rank``/``origin_index``), a
reduction of them (``.chunks``), an iterable of (rank, chunk) pairs, or an
encoded value tuple.

>>> exp = standard_expected("allgather", ngpus=2, nchunksperloop=2, root=0)
>>> sorted(exp.items())[:2]
[((0, 'o', 0), (0,)), ((0, 'o', 1), (16777216,))]
"""

from __future__ import annotations

from typing import Any, Callable

from msccl_py.errors import VerificationError
from msccl_py.verify.data import STRIDE, encode

REDUCING = frozenset({"allreduce", "reduce_scatter", "reduce"})
STANDARD = frozenset({"allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast",
                      "reduce"})


def to_value(obj: Any) -> tuple[int, ...] | None:
    """Turn a Chunk-like object, reduction, pair list or value tuple into a value."""
    if obj is None:
        return None
    if hasattr(obj, "origin_rank"):
        return (encode(obj.origin_rank, obj.origin_index),)
    if hasattr(obj, "chunks"):
        return tuple(sorted(encode(c.origin_rank, c.origin_index) for c in obj.chunks))
    items = list(obj)
    if all(isinstance(x, int) for x in items):
        return tuple(sorted(items))
    if all(isinstance(x, (tuple, list)) and len(x) == 2 for x in items):
        return tuple(sorted(encode(int(r), int(k)) for r, k in items))
    raise VerificationError(f"cannot read expected value {obj!r}: give a Chunk, a reduction of "
                            "Chunks, or (rank, chunk) pairs")


def standard_initial(collective: str, call_chunks) -> dict:
    """``{(rank, 'i'): [values]}``: input chunk k of rank r holds (r, k)."""
    return {(r, "i"): [(r * STRIDE + k,) for k in range(int(call_chunks[r][0]))]
            for r in range(len(call_chunks))}


def standard_expected(collective: str, ngpus: int, nchunksperloop: int,
                      root: int = 0) -> dict:
    """``{(rank, 'o', index): value}`` for a standard collective (see module doc)."""
    n, g = nchunksperloop, ngpus
    exp: dict = {}
    if collective == "allreduce":
        for k in range(n):
            v = tuple(s * STRIDE + k for s in range(g))
            for r in range(g):
                exp[(r, "o", k)] = v
    elif collective == "allgather":
        ic = n // g
        for r in range(g):
            for s in range(g):
                for k in range(ic):
                    exp[(r, "o", s * ic + k)] = (s * STRIDE + k,)
    elif collective == "reduce_scatter":
        oc = n // g
        for r in range(g):
            for k in range(oc):
                exp[(r, "o", k)] = tuple(s * STRIDE + r * oc + k for s in range(g))
    elif collective == "alltoall":
        m = n // g
        for r in range(g):
            for s in range(g):
                for k in range(m):
                    exp[(r, "o", s * m + k)] = (s * STRIDE + r * m + k,)
    elif collective == "broadcast":
        for r in range(g):
            for k in range(n):
                exp[(r, "o", k)] = (root * STRIDE + k,)
    elif collective == "reduce":
        for k in range(n):
            exp[(root, "o", k)] = tuple(s * STRIDE + k for s in range(g))
    else:
        raise VerificationError(f"no built-in postcondition for collective {collective!r}; "
                                "pass postcondition=")
    return exp


class _Probe:
    """Stands in for a buffer slot while a Collective's ``check`` runs; records the expectation."""

    __slots__ = ("key", "sink")

    def __init__(self, key, sink):
        self.key, self.sink = key, sink

    def __eq__(self, other):
        self.sink[self.key] = other
        return True

    def __ne__(self, other):
        self.sink[self.key] = other
        return False

    __hash__ = None


class _ProbeBuffer:
    def __init__(self, rank, name, sink):
        self.rank, self.name, self.sink = rank, name, sink

    def __getitem__(self, index):
        return _Probe((self.rank, self.name, int(index)), self.sink)

    def __len__(self):
        return 1 << 30


class _ProbeRank(dict):
    def __init__(self, rank, sink):
        super().__init__()
        self.rank, self.sink = rank, sink

    def __getitem__(self, key):
        name = str(getattr(key, "value", key))
        return _ProbeBuffer(self.rank, name, self.sink)


class _ProbeProgram:
    def __init__(self, nranks, sink):
        self.buffers = [_ProbeRank(r, sink) for r in range(nranks)]
        self.num_ranks = nranks


def from_collective(collective: Any, nranks: int) -> tuple[dict, dict]:
    """(initial, expected) of a Collective-like object, without importing the DSL."""
    initial: dict = {}
    for r, bufs in enumerate(collective.init_buffers()):
        for key, values in bufs.items():
            name = str(getattr(key, "value", key))
            if name in ("i", "o", "s"):
                initial[(r, name)] = [to_value(v) for v in list(values)]
    sink: dict = {}
    import contextlib
    import io
    with contextlib.redirect_stderr(io.StringIO()):
        collective.check(_ProbeProgram(nranks, sink))
    expected = {k: to_value(v) for k, v in sink.items() if v is not None}
    return initial, expected


def resolve(postcondition: Any, collective: str, ngpus: int, nchunksperloop: int,
            call_chunks, out_chunks: list[int], root: int) -> tuple[dict, dict | None]:
    """(initial, expected) for a verify call; expected ``None`` means nothing to check."""
    initial = standard_initial(collective, call_chunks)
    if postcondition is None:
        if collective in STANDARD:
            return initial, standard_expected(collective, ngpus, nchunksperloop, root)
        return initial, None
    if hasattr(postcondition, "init_buffers") and hasattr(postcondition, "check"):
        init, exp = from_collective(postcondition, ngpus)
        return (init or initial), exp
    if callable(postcondition):
        fn: Callable = postcondition
        exp = {}
        for r in range(ngpus):
            for k in range(out_chunks[r]):
                v = fn(r, k)
                if v is not None:
                    exp[(r, "o", k)] = to_value(v)
        return initial, exp
    exp = {}
    for key, v in dict(postcondition).items():
        if len(key) == 2:
            key = (key[0], "o", key[1])
        exp[(int(key[0]), str(getattr(key[1], "value", key[1])), int(key[2]))] = to_value(v)
    return initial, exp
