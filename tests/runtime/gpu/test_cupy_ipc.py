"""One process per GPU over IPC, on the fake CuPy (a fork-shared heap stands in for IPC)."""

from __future__ import annotations

import sys

import fake_cupy
import numpy as np
import pytest
from gpu_runtime_algos import needs_gxx

from msccl_py.comm.selector import Selector
from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.cupy import device, ipc


def _work(comm, n):
    import cupy as cp
    x = cp.full(n, comm.rank + 1.0, dtype=np.float32)
    total = comm.all_reduce(x)
    total2 = comm.all_reduce(x, "max")            # second call: FIFO counters carry on
    gathered = comm.all_gather(cp.full(4, float(comm.rank), dtype=np.float32))
    return np.array(total), np.array(total2), np.array(gathered)


@needs_gxx
def test_launch_runs_collectives_in_rank_processes(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy.make(ndev=4, ipc=True))
    monkeypatch.setattr(device, "_kernels", {})
    out = ipc.launch(_work, 4, args=(1024,), start_method="fork", watchdog=10.0,
                     selector=Selector)
    for total, mx, gathered in out:
        np.testing.assert_array_equal(total, np.full(1024, 10.0, np.float32))
        np.testing.assert_array_equal(mx, np.full(1024, 4.0, np.float32))
        np.testing.assert_array_equal(gathered, np.repeat(np.arange(4.0), 4))


def test_launch_without_cupy_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(MscclRuntimeError, match="cupy backend is unavailable"):
        ipc.launch(_work, 2, args=(4,))


def test_collectives_without_a_selector_say_so(monkeypatch):
    """The GPU path runs library programs only, chosen by the selector it is given."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy.make(ndev=2, ipc=True))
    monkeypatch.setattr(device, "_kernels", {})
    with pytest.raises(MscclRuntimeError, match="no program selector was given"):
        ipc.launch(_work, 2, args=(4,), start_method="fork")
