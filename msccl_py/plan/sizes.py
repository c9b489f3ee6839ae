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

UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
         "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes in ``text``: a number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB; K/M/G
    mean KiB/MiB/GiB)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in UNITS:
        raise SizeError(f"cannot read size {text!r}: use a number of bytes with an optional "
                        "unit B, KiB, MiB, GiB, KB, MB or GB (e.g. 64MiB)")
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
