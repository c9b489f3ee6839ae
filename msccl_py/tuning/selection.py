"""Which loaded XML a runtime runs for a call, or NCCL: each runtime's selection rule as data.

The three MSCCL runtimes pick an algorithm for a call the same way in
outline (the first loaded file whose collective, rank count, call kind and
size window match, else NCCL's own algorithm) but differ in the details
that decide which sizes a tuned directory covers:

- the size window: ``minBytes <= n <= maxBytes`` in msccl-executor-nccl and
  RCCL (``maxBytes="0"``: no upper bound), ``minBytes <= n < maxBytes`` in
  microsoft/msccl (``maxBytes="0"``: no size at all; no ``maxBytes``: 128 MiB);
- the chunk count: the call's element count must divide by ``nchunksperloop``
  (microsoft/msccl counts an allgather in bytes, and keeps the count in a C
  ``int``);
- the call kind: in-place calls need ``inplace="1"``, out-of-place ones
  ``outofplace="1"``; microsoft/msccl reads only ``inplace`` (a file serves
  one kind) and refuses in-place alltoall;
- how many files load: 4 in microsoft/msccl, 1024 in the others.

``n`` is the call's size as nccl-tests prints it (the output of an
allgather, the input of a reduce-scatter, the buffer otherwise).
docs/tuning.md cites the source of each rule.

>>> meta = AlgoMeta("allreduce", 8, nchunks=8, min_bytes=0, max_bytes=1 << 20,
...                 inplace=True, outofplace=False)
>>> [serves(meta, n, 4, True, "msccl-executor") for n in (1 << 20, 1000, 992)]
[True, False, True]
>>> serves(meta, 1 << 20, 4, True, "msccl"), serves(meta, 1 << 20, 4, False, "rccl")
(False, False)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from lxml import etree

from msccl_py.errors import SizeError, XmlError

#: the largest ``maxBytes`` the runtimes' int64 field holds: written for "no upper bound"
UNBOUNDED = (1 << 63) - 1
#: microsoft/msccl's ``maxBytes`` when an XML has none (``1 << 27``, "sufficient for now")
MSCCL_DEFAULT_MAX_BYTES = 1 << 27

#: bytes per element of NCCL's data types
ITEMSIZE = {"int8": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
            "float32": 4, "int64": 8, "uint64": 8, "float64": 8}

#: collectives whose call count is per rank (the runtimes' ``sizeMultiplier`` of nRanks)
_PER_RANK = frozenset({"allgather", "reduce_scatter", "alltoall"})


@dataclass(frozen=True)
class Rule:
    """One runtime's selection rule (see the module docstring)."""

    target: str
    half_open: bool
    max_algos: int
    one_kind_per_file: bool
    source: str


RULES: dict[str, Rule] = {
    "msccl": Rule("msccl", half_open=True, max_algos=4, one_kind_per_file=True,
                  source="microsoft/msccl src/graph/tuning.cc ncclTopoGetMSCCLAlgo"),
    "msccl-executor": Rule("msccl-executor", half_open=False, max_algos=1024,
                           one_kind_per_file=False,
                           source="Azure/msccl-executor-nccl src/misc/msccl/msccl_lifecycle.cc "
                                  "mscclInternalSchedulerSelectAlgo"),
    "rccl": Rule("rccl", half_open=False, max_algos=1024, one_kind_per_file=False,
                 source="ROCm/rccl src/misc/msccl/msccl_lifecycle.cc "
                        "mscclInternalSchedulerSelectAlgo"),
}


def rule(target: str) -> Rule:
    """The :class:`Rule` of runtime ``target``."""
    try:
        return RULES[target]
    except KeyError:
        raise XmlError(f"unknown XML target {target!r}; choose one of "
                       f"{', '.join(RULES)}") from None


def itemsize(dtype: str) -> int:
    """Bytes per element of NCCL data type ``dtype`` (``float32``, ``bfloat16``, ...)."""
    try:
        return ITEMSIZE[dtype]
    except KeyError:
        raise SizeError(f"unknown data type {dtype!r}; choose one of "
                        f"{', '.join(ITEMSIZE)}") from None


@dataclass(frozen=True)
class AlgoMeta:
    """What a runtime reads of an XML to select it: the ``<algo>`` element's attributes.

    ``max_bytes`` is the attribute as written (``None``: absent).
    """

    collective: str
    ngpus: int
    nchunks: int
    min_bytes: int
    max_bytes: int | None
    inplace: bool
    outofplace: bool
    path: str = ""


def bounds(target: str, lo: int, hi: int | None) -> tuple[int, int]:
    """``(minBytes, maxBytes)`` that make ``target`` select sizes ``lo..hi`` (``hi`` inclusive,
    ``None`` for no bound).

    >>> bounds("msccl-executor", 0, 1023), bounds("msccl", 0, 1023), bounds("msccl", 1024, None)
    ((0, 1023), (0, 1024), (1024, 9223372036854775807))
    """
    if hi is None:
        return lo, UNBOUNDED
    return lo, hi + 1 if rule(target).half_open else hi


def window(meta: AlgoMeta, target: str) -> tuple[int, int | None]:
    """The sizes ``lo..hi`` (inclusive; ``hi`` None = no bound) ``target`` selects ``meta`` for;
    ``hi < lo`` when none. ``maxBytes`` = :data:`UNBOUNDED` is no bound under either rule
    (under the half-open one it leaves out 2^63-1 bytes alone, which no call has).

    >>> window(AlgoMeta("allreduce", 8, 8, 0, 0, True, False), "msccl")
    (0, -1)
    """
    top = meta.max_bytes
    if rule(target).half_open:
        top = MSCCL_DEFAULT_MAX_BYTES if top is None else top
        return (meta.min_bytes, None) if top >= UNBOUNDED else (meta.min_bytes, top - 1)
    if not top or top >= UNBOUNDED:
        return meta.min_bytes, None
    return meta.min_bytes, top


def takes(meta: AlgoMeta, nbytes: int, size: int, target: str) -> bool:
    """True when a call of ``nbytes`` of ``size``-byte elements passes the chunk-count test.

    The runtimes test the call's element count (summed over ranks for the
    per-rank collectives); microsoft/msccl counts an allgather in bytes and
    keeps the count in an ``int``, so sizes past 2^31 wrap.
    """
    count = nbytes // size
    if count <= 0:
        return False
    if rule(target).half_open and meta.collective != "alltoall":
        if meta.collective == "allgather":
            count = nbytes
        count &= 0xFFFFFFFF
        if count >= 1 << 31:
            count -= 1 << 32
    return count % meta.nchunks == 0


def granule(meta: AlgoMeta, size: int, target: str) -> int:
    """Call sizes ``meta``'s chunk count takes are the multiples of this many bytes (below 2^31
    elements; past that microsoft/msccl's count wraps).

    >>> granule(AlgoMeta("allgather", 8, 16, 0, None, False, True), 2, "msccl-executor")
    32
    """
    unit = meta.nchunks if rule(target).half_open and meta.collective == "allgather" \
        else meta.nchunks * size
    return math.lcm(call_unit(meta.collective, meta.ngpus, size), unit)


def call_unit(collective: str, ngpus: int, size: int) -> int:
    """Every call size of ``size``-byte elements is a multiple of this many bytes."""
    return size * (ngpus if collective in _PER_RANK else 1)


def serves(meta: AlgoMeta, nbytes: int, size: int, inplace: bool, target: str) -> bool:
    """True when ``target`` would run ``meta`` for a call of ``nbytes`` (``size``-byte elements,
    in place or not), collective and rank count aside."""
    lo, hi = window(meta, target)
    if nbytes < lo or (hi is not None and nbytes > hi):
        return False
    if not takes(meta, nbytes, size, target):
        return False
    if rule(target).one_kind_per_file:  # ncclAllToAll reads no flag, and refuses in-place
        return not inplace if meta.collective == "alltoall" else meta.inplace == inplace
    return meta.inplace if inplace else meta.outofplace


def check_call(collective: str, ngpus: int, nbytes: int, size: int) -> None:
    """Raise :class:`SizeError` unless ``nbytes`` is a call size of ``size``-byte elements."""
    per = call_unit(collective, ngpus, size)
    if nbytes <= 0 or nbytes % per:
        raise SizeError(f"no {collective} call on {ngpus} ranks of {size}-byte elements has "
                        f"{nbytes} bytes: sizes are positive multiples of {per}")


def select(metas: list[AlgoMeta], collective: str, ngpus: int, nbytes: int, size: int,
           inplace: bool, target: str) -> int | None:
    """Index of the file ``target`` runs for the call, ``None`` when NCCL runs it.

    ``metas`` are in load order (see :func:`load_order`); the first match
    wins. microsoft/msccl refuses an in-place alltoall outright, which
    raises :class:`SizeError` here.
    """
    check_call(collective, ngpus, nbytes, size)
    if inplace and collective == "alltoall" and rule(target).half_open:
        raise SizeError("microsoft/msccl refuses in-place alltoall calls (ncclInvalidUsage)")
    for k, m in enumerate(metas[:rule(target).max_algos]):
        if m.collective == collective and m.ngpus == ngpus and serves(m, nbytes, size, inplace,
                                                                      target):
            return k
    return None


def load_order(paths: list[str | os.PathLike], target: str) -> list[str]:
    """Files in the order ``target`` loads them: msccl-executor sorts the directory's paths;
    microsoft/msccl keeps ``MSCCL_XML_FILES``'s order; RCCL takes ``readdir``'s, which no
    tuned directory may depend on (its ranges never overlap)."""
    names = [os.fspath(p) for p in paths]
    return sorted(names) if target == "msccl-executor" else names


_COLLS = {"reducescatter": "reduce_scatter"}


def read_meta(path: str | os.PathLike) -> AlgoMeta:
    """The :class:`AlgoMeta` of the XML file at ``path`` (its first element's attributes)."""
    try:
        _, el = next(etree.iterparse(os.fspath(path), events=("start",)))
    except (etree.XMLSyntaxError, StopIteration, OSError) as exc:
        raise XmlError(f"cannot read an <algo> element: {exc}", file=os.fspath(path)) from None
    a = el.attrib
    try:
        inplace = bool(int(a["inplace"]))
        max_bytes = int(a["maxBytes"]) if "maxBytes" in a else None
        return AlgoMeta(_COLLS.get(a["coll"], a["coll"]), int(a["ngpus"]),
                        int(a["nchunksperloop"]), int(a.get("minBytes", 0)), max_bytes, inplace,
                        bool(int(a["outofplace"])) if "outofplace" in a else not inplace,
                        os.fspath(path))
    except (KeyError, ValueError) as exc:
        raise XmlError(f"<algo> attribute {exc} missing or not an integer",
                       line=el.sourceline, file=os.fspath(path)) from None
