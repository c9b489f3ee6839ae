"""Initial buffers and expected outputs of each collective, as symbolic values.

Chunk conventions: input chunk ``k`` of rank ``r`` holds (r, k).
With ``n = nchunksperloop`` and ``g = ngpus``:

* allreduce: output chunk k of every rank = sum over ranks s of (s, k)
* allgather: output chunk ``s*ic + k`` = (s, k), ``ic = n/g``
* reduce_scatter: output chunk k of rank r = sum over s of (s, r*oc + k), ``oc = n/g``
* alltoall: output chunk ``s*m + k`` of rank r = (s, r*m + k), ``m = n/g``
* broadcast: output chunk k of every rank = (root, k)
* reduce: output chunk k of the root = sum over s of (s, k); other outputs free
* gather: output chunk ``s*c + k`` of the root = (s, k), ``c = n/g``; other outputs free
* scatter: output chunk k of rank r = (root, r*c + k), ``c = n/g``

The root comes from the XML's ``root`` attribute (msccl_py writes it; the
runtimes ignore it), else 0, unless the caller says otherwise. A custom collective needs a postcondition: a mapping
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

import contextlib
import io
from collections.abc import Callable
from typing import Any

from msccl_py import collective_table
from msccl_py.collective_table import KINDS
from msccl_py.errors import VerificationError
from msccl_py.verify.data import STRIDE, encode

STANDARD = collective_table.STANDARD


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
        return tuple(sorted([int(r) * STRIDE + int(k) for r, k in items]))   # encode(r, k)
    raise VerificationError(f"cannot read expected value {obj!r}: give a Chunk, a reduction of "
                            "Chunks, or (rank, chunk) pairs")


def standard_initial(collective: str, call_chunks) -> dict:
    """``{(rank, 'i'): [values]}``: input chunk k of rank r holds (r, k)."""
    return {(r, "i"): [(r * STRIDE + k,) for k in range(int(call_chunks[r][0]))]
            for r in range(len(call_chunks))}


def standard_expected(collective: str, ngpus: int, nchunksperloop: int,
                      root: int = 0) -> dict:
    """``{(rank, 'o', index): value}`` for a standard collective (see module doc)."""
    found = KINDS.get(collective)
    if found is None or found.postcondition is None:
        raise VerificationError(f"no built-in postcondition for collective {collective!r}; "
                                "pass postcondition=")
    return found.postcondition(nchunksperloop, ngpus, root, STRIDE)


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


def _name(key) -> str:
    return str(getattr(key, "value", key))


def from_collective(collective: Any, nranks: int) -> tuple[dict, dict | None]:
    """(initial, expected) of a Collective-like object, without importing the DSL.

    The expectation is read by running ``check`` on probe slots that record
    what each slot is compared with; ``None`` when ``check`` does more than
    compare (then :func:`collective_checker` runs it on the real result).
    """
    init = collective.init_buffers()
    initial: dict = {}
    for r, bufs in enumerate(init):
        for key, values in bufs.items():
            if _name(key) in ("i", "o", "s"):
                initial[(r, _name(key))] = [to_value(v) for v in list(values)]
    sink: dict = {}
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            collective.check(_ProbeProgram(nranks, sink))
    except (AttributeError, TypeError, IndexError, KeyError, ValueError):
        return initial, None
    return initial, {k: to_value(v) for k, v in sink.items() if v is not None}


def collective_checker(collective: Any, out_chunks: list[int]) -> Callable:
    """A function ``state -> None | str`` running the Collective's own ``check`` on a result.

    Slots are rebuilt as the collective's own chunk objects (the class of the
    chunks ``init_buffers`` returns, reductions through their ``reduce``), so
    any ``check`` works; the text is the first line ``check`` reports.
    """
    init = collective.init_buffers()
    sample = next((v for bufs in init for vals in bufs.values() for v in list(vals)
                   if v is not None), None)
    keys = {_name(k): k for k in init[0]} if init else {}

    def make(value):
        if value is None or sample is None:
            return None
        chunks = [type(sample)(*divmod(c, STRIDE)) for c in value]
        acc = chunks[0]
        for c in chunks[1:]:
            acc = acc.reduce(-1, c)
        return acc

    def check(state) -> str | None:
        buffers = []
        for r in range(len(out_chunks)):
            bufs = {}
            for name, key in keys.items():
                n = out_chunks[r] if name == "o" else len(list(init[r][key]))
                bufs[key] = [make(state.value(r, name, k)) for k in range(n)]
            buffers.append(bufs)
        prog = _ResultProgram(buffers)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            ok = collective.check(prog)
        if ok:
            return None
        lines = err.getvalue().strip().splitlines()
        return lines[0] if lines else "the collective's check() reports a wrong result"

    return check


class _ResultProgram:
    def __init__(self, buffers):
        self.buffers = buffers
        self.num_ranks = len(buffers)


def resolve(postcondition: Any, collective: str, ngpus: int, nchunksperloop: int,
            call_chunks, out_chunks: list[int], root: int) -> tuple[dict, dict | None]:
    """(initial, expected) for a verify call.

    ``expected`` is a mapping ``{(rank, buffer, index): value}``, a function
    ``state -> None | str`` (a Collective whose ``check`` must run on the
    result) or ``None`` (nothing to check).
    """
    initial = standard_initial(collective, call_chunks)
    if postcondition is None:
        if collective in STANDARD:
            return initial, standard_expected(collective, ngpus, nchunksperloop, root)
        return initial, None
    if hasattr(postcondition, "init_buffers") and hasattr(postcondition, "check"):
        init, exp = from_collective(postcondition, ngpus)
        if exp is None:
            return (init or initial), collective_checker(postcondition, out_chunks)
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
    values: dict = {}  # one conversion per distinct object (slots often share a value)
    mapping = dict(postcondition)  # keeps every value alive, so ids stay unique
    for key, v in mapping.items():
        # a (rank, buffer name, index) of plain ints and str is its own normal form
        plain = (type(key) is tuple and len(key) == 3 and type(key[0]) is int
                 and type(key[1]) is str and type(key[2]) is int)
        if not plain and len(key) == 2:
            key = (key[0], "o", key[1])
        value = values.get(id(v))
        if value is None:
            value = values[id(v)] = to_value(v)
        exp[key if plain else (int(key[0]), str(getattr(key[1], "value", key[1])),
                               int(key[2]))] = value
    return initial, exp
