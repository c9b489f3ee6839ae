"""The engines between hosts move any element type the runtime has, bfloat16 included.

bfloat16 travels as ``V2`` bit patterns, which neither torch.from_numpy nor mpi4py
maps to a type of theirs; the engines send a payload's bytes instead.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.bfloat16 import BF16, from_float32, to_float32
from msccl_py.transport.engines import HEADER_WORDS, raw

PAYLOADS = [from_float32(np.array([1.5, -2.25, 3.0, 65280.0], dtype=np.float32)),
            np.array([1, -2, 3], dtype=np.int8), np.arange(5, dtype=np.float64) / 3,
            np.array([0.5, 7.0], dtype=np.float16)]


def _frame_roundtrip(sender, receiver, payload: np.ndarray) -> np.ndarray:
    hdr = np.arange(HEADER_WORDS, dtype=np.int64) * 3
    sender.send(receiver.rank, hdr, payload)
    got_hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
    assert receiver.recv_header(got_hdr) == sender.rank
    assert got_hdr.tolist() == hdr.tolist()
    got = np.zeros_like(payload)
    receiver.recv_payload(sender.rank, got)
    sender.flush()
    return got


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_raw_is_a_byte_view():
    x = PAYLOADS[0]
    r = raw(x)
    assert r.dtype == np.uint8 and r.size == x.nbytes and np.shares_memory(r, x)
    with pytest.raises(MscclRuntimeError, match="contiguous"):
        raw(np.arange(8.0)[::2])


def test_gloo_engine_moves_every_element_type():
    dist = pytest.importorskip("torch.distributed")
    from msccl_py.transport.engines import GlooEngine
    store = dist.HashStore()
    engines: list = [None, None]

    def make(r: int) -> None:
        engines[r] = GlooEngine.from_store(store, r, 2, 30)

    threads = [threading.Thread(target=make, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        for x in PAYLOADS:
            got = _frame_roundtrip(engines[0], engines[1], x)
            assert _same(got, x), (x.dtype, got)
        assert to_float32(_frame_roundtrip(engines[1], engines[0], PAYLOADS[0])).tolist() == \
            [1.5, -2.25, 3.0, 65280.0]
    finally:
        for e in engines:
            e.close()


def test_mpi_engine_moves_every_element_type():
    mpi = pytest.importorskip("mpi4py.MPI")
    from msccl_py.transport.engines import MpiEngine
    engine = MpiEngine(mpi.COMM_SELF)
    try:
        for x in PAYLOADS:
            got = _frame_roundtrip(engine, engine, x)
            assert _same(got, x), (x.dtype, got)
    finally:
        engine.close()
