"""Byte sizes: parsing ``64MiB``-style sizes and splitting a call size into chunks.

A call's size is each rank's buffer size as NCCL counts it for MSCCL
(nccl-tests' "size": the output for allgather, the input for
reduce_scatter, the whole buffer otherwise), i.e. ``nchunksperloop * S *
itemsize`` with ``S`` elements per chunk.

>>> parse_size("64MiB"), parse_size("1.5KB"), parse_size("4096")
(67108864, 1500, 4096)
>>> chunk_elems(8, 1024, 4)
32
"""

from __future__ import annotations

import re

from msccl_py.errors import SizeError

#: every unit a size may carry, in any case: binary, decimal, and K/M/G/T for KiB/MiB/GiB/TiB
UNIT_FACTORS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
                "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4,
                "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
UNITS = {"": 1, **{unit.lower(): factor for unit, factor in UNIT_FACTORS.items()}}
#: the hint every size error gives, made from the table so it names every unit
UNIT_HINT = (f"a number of bytes with an optional unit: {', '.join(UNIT_FACTORS)} (any case; "
             f"K, M, G, T are KiB, MiB, GiB, TiB), e.g. 64MiB")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes in ``text``: a number with an optional unit (:data:`UNIT_FACTORS`)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in UNITS:
        raise SizeError(f"cannot read size {text!r}: use {UNIT_HINT}")
    value = float(m.group(1)) * UNITS[m.group(2).lower()]
    if value != int(value):
        raise SizeError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def format_size(nbytes: int) -> str:
    """``67108864`` -> ``64 MiB`` (exact binary units only, else bytes)."""
    for unit, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult} {unit}"
    return f"{nbytes} B"


def chunk_elems(nchunksperloop: int, nbytes: int, itemsize: int) -> int:
    """Elements per chunk of a call of ``nbytes``; a size that does not divide is an error
    naming the nearest sizes that would."""
    per = nchunksperloop * itemsize
    if nbytes <= 0:
        raise SizeError(f"size must be positive, got {nbytes} bytes")
    if nbytes % per:
        lo = nbytes // per * per
        hi = lo + per
        near = f"{format_size(lo)} or {format_size(hi)}" if lo else format_size(hi)
        raise SizeError(f"{format_size(nbytes)} does not divide into {nchunksperloop} chunks of "
                        f"{itemsize}-byte elements: sizes must be multiples of {per} bytes "
                        f"(e.g. {near})")
    return nbytes // per
