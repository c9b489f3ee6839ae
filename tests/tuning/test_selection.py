"""The runtimes' selection rules: size windows, maxBytes=0, chunk-count fallback, call kinds."""

from __future__ import annotations

import pytest

from msccl_py.errors import SizeError, XmlError
from msccl_py.tuning.selection import (MSCCL_DEFAULT_MAX_BYTES, UNBOUNDED, AlgoMeta, bounds,
                                       granule, load_order, read_meta, select, serves, takes,
                                       window)


def _meta(lo=0, hi=None, nchunks=1, coll="allreduce", inplace=True, outofplace=True, ngpus=8):
    return AlgoMeta(coll, ngpus, nchunks, lo, hi, inplace, outofplace)


@pytest.mark.parametrize("target", ["msccl-executor", "rccl", "msccl"])
def test_bounds_select_exactly_the_range(target):
    lo, hi = 4096, 65535
    m = _meta(*bounds(target, lo, hi))
    assert window(m, target) == (lo, hi)
    assert [serves(m, n, 1, True, target) for n in (lo - 1, lo, hi, hi + 1)] == [False, True,
                                                                                True, False]
    last = _meta(*bounds(target, hi + 1, None))
    assert window(last, target) == (hi + 1, None)
    assert serves(last, 1 << 62, 1, True, target) and not serves(last, hi, 1, True, target)


def test_inclusive_and_half_open_attributes():
    assert bounds("msccl-executor", 0, 1023) == (0, 1023) == bounds("rccl", 0, 1023)
    assert bounds("msccl", 0, 1023) == (0, 1024)  # minBytes <= n < maxBytes
    assert bounds("msccl", 1024, None) == (1024, UNBOUNDED)


def test_what_max_bytes_zero_and_absent_mean():
    # msccl-executor and RCCL: maxBytes 0 is no upper bound
    assert window(_meta(0, 0), "msccl-executor") == (0, None)
    assert serves(_meta(0, 0), 1 << 40, 1, True, "rccl")
    # microsoft/msccl: n < 0 never holds, so nothing; without maxBytes, 128 MiB
    lo, hi = window(_meta(0, 0), "msccl")
    assert hi < lo and not serves(_meta(0, 0), 4, 1, True, "msccl")
    assert window(_meta(0, None), "msccl") == (0, MSCCL_DEFAULT_MAX_BYTES - 1)


def test_sizes_the_chunk_count_cannot_take_fall_back_to_nccl():
    m = _meta(nchunks=8)
    # float32: 1000 bytes is 250 elements, not a multiple of 8; 992 is 248
    assert not takes(m, 1000, 4, "msccl-executor") and takes(m, 992, 4, "msccl-executor")
    assert select([m], "allreduce", 8, 1000, 4, True, "msccl-executor") is None
    assert select([m], "allreduce", 8, 992, 4, True, "msccl-executor") == 0
    assert granule(m, 4, "msccl-executor") == 32
    # 7 rings x 8 ranks: no power of two runs it
    rings = _meta(nchunks=56)
    assert not any(takes(rings, 1 << k, 4, "msccl") for k in range(2, 34))


def test_msccl_counts_an_allgather_in_bytes_and_wraps_at_int():
    ag = _meta(nchunks=64, coll="allgather")
    # 128 bytes of float32 over 8 ranks: 32 elements (not a multiple of 64), 128 bytes (one)
    assert not takes(ag, 128, 4, "msccl-executor") and takes(ag, 128, 4, "msccl")
    assert granule(ag, 4, "msccl-executor") == 256 and granule(ag, 4, "msccl") == 64
    three = _meta(nchunks=3)
    n = ((1 << 32) + 3) * 4  # the count wraps to 3 in microsoft/msccl's int
    assert takes(three, n, 4, "msccl") and not takes(three, n, 4, "msccl-executor")


def test_call_kinds_per_runtime():
    both = _meta(inplace=True, outofplace=True)
    assert serves(both, 64, 4, True, "msccl-executor") and serves(both, 64, 4, False, "rccl")
    # microsoft/msccl reads only inplace: this file serves in-place calls alone
    assert serves(both, 64, 4, True, "msccl") and not serves(both, 64, 4, False, "msccl")
    oop = _meta(inplace=False, outofplace=True)
    assert serves(oop, 64, 4, False, "msccl") and not serves(oop, 64, 4, True, "msccl-executor")
    a2a = _meta(coll="alltoall", inplace=True, outofplace=False)
    assert select([a2a], "alltoall", 8, 256, 4, False, "msccl") == 0  # ncclAllToAll reads no flag
    with pytest.raises(SizeError, match="refuses in-place alltoall"):
        select([a2a], "alltoall", 8, 256, 4, True, "msccl")


def test_first_match_in_load_order_and_msccl_loads_four():
    wide, narrow = _meta(0, None), _meta(0, 1 << 20)
    assert select([narrow, wide], "allreduce", 8, 1024, 4, True, "msccl-executor") == 0
    assert select([_meta(0, 0)] * 4 + [wide], "allreduce", 8, 1024, 4, True, "msccl") is None
    assert select([_meta(0, 0)] * 4 + [wide], "allreduce", 8, 1024, 4, True, "rccl") == 0
    assert load_order(["b.xml", "a.xml"], "msccl-executor") == ["a.xml", "b.xml"]
    assert load_order(["b.xml", "a.xml"], "msccl") == ["b.xml", "a.xml"]
    assert select([wide], "reduce_scatter", 8, 1024, 4, True, "rccl") is None  # another collective
    with pytest.raises(SizeError, match="multiples of 32"):
        select([wide], "allgather", 8, 100, 4, True, "rccl")


def test_read_meta(tmp_path):
    f = tmp_path / "a.xml"
    f.write_text('<algo name="a" proto="LL" nchannels="1" nchunksperloop="16" ngpus="8" '
                 'coll="reducescatter" inplace="0" outofplace="1" minBytes="1" maxBytes="9">\n'
                 "</algo>\n")
    assert read_meta(f) == AlgoMeta("reduce_scatter", 8, 16, 1, 9, False, True, str(f))
    old = tmp_path / "old.xml"
    old.write_text('<algo name="a" proto="LL" nchannels="1" nchunksperloop="16" ngpus="8" '
                   'coll="allreduce" inplace="1"></algo>\n')
    assert read_meta(old).max_bytes is None and not read_meta(old).outofplace
    table = tmp_path / "tune.txt"
    table.write_text("sizes  winner\n")
    with pytest.raises(XmlError, match="tune.txt"):
        read_meta(table)
