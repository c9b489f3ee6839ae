"""Hand-built algorithms and helpers for the GPU-runtime tests (no shared data needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from msccl_py.runtime.cupy.samples import (  # noqa: F401
    fifo_deadlock_xml,
    gather_reduce,
    ring_allreduce,
)

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared"
CORPUS = SHARED / "corpus" / "xml"

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def int_inputs(alg, chunk_elems: int, dtype, op: str = "sum",
               seed: int = 0) -> list[np.ndarray]:
    """Integer-valued inputs small enough that every op is exact in every dtype."""
    from msccl_py.plan.tables import plan_for
    cc = plan_for(alg).call_chunks
    rng = np.random.default_rng(seed)
    lo, hi = {"prod": (1, 3), "max": (0, 100), "min": (0, 100)}.get(op, (0, 8))
    return [rng.integers(lo, hi, int(cc[r, 0]) * chunk_elems).astype(dtype)
            for r in range(alg.ngpus)]


def same(a, b) -> bool:
    """Equal outputs, NaN (unwritten poison) matching NaN."""
    if len(a) != len(b):
        return False
    return all(np.array_equal(x, y, equal_nan=np.asarray(x).dtype.kind == "f")
               for x, y in zip(a, b))
