"""msccl_py.torch.cuda without a GPU: why the device runtime is not used, and the host path.

No CUDA tensor can exist in the CPU build of torch, so what runs here is the
plumbing around the CuPy runtime: the reason it is unusable, and the host
path each call falls back to, on CPU tensors (contiguous and strided) with a
communicator that records its calls. The device path itself is proven only on
a GPU (docs/torch.md says so).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

# not importorskip("torch"): without torch, this folder imports as a namespace "torch"
pytest.importorskip("torch.distributed")
import torch  # noqa: E402

from msccl_py.torch import cuda  # noqa: E402


class RecordingComm:
    """A 2-rank communicator's answers, computed locally: the other rank holds ``x + 1``."""

    def __init__(self, hosts):
        self.layout = SimpleNamespace(hosts=hosts)
        self.calls = []

    def all_reduce(self, x, op, out):
        self.calls.append(("all_reduce", op, x.dtype))
        np.copyto(out, x + (x + 1))

    def broadcast(self, x, root, out):
        self.calls.append(("broadcast", root))
        np.copyto(out, np.full_like(x, 42))

    def all_gather(self, x, out):
        self.calls.append(("all_gather",))
        np.copyto(out, np.concatenate([x, x + 1]))

    def reduce_scatter(self, x, op, out):
        self.calls.append(("reduce_scatter", op))
        np.copyto(out, (x + (x + 1))[:out.size])


def test_several_hosts_rule_out_cuda_ipc():
    dc = cuda.DeviceCollectives(RecordingComm(["a", "b"]))
    assert dc.reason == "CUDA IPC reaches one host only; the launch spans several"
    assert dc._device(torch.zeros(1)) is None


def test_without_cupy_or_gpu_the_reason_says_which():
    from msccl_py.runtime.cupy.device import unavailable_reason
    dc = cuda.DeviceCollectives(RecordingComm(["a"]))
    assert dc.reason == unavailable_reason()
    if dc.reason is not None:
        assert "CuPy" in dc.reason


def test_host_path_writes_results_back_into_the_tensors():
    comm = RecordingComm(["a", "b"])
    dc = cuda.DeviceCollectives(comm)
    t = torch.arange(6.0)
    dc.all_reduce(t, "sum")
    assert t.tolist() == [2 * v + 1 for v in range(6)]
    col = torch.zeros(3, 2)[:, 1]                      # strided
    dc.broadcast(col, 1)
    assert col.tolist() == [42.0, 42.0, 42.0]
    out = torch.zeros(2, 3).t()                        # a strided output of 6 elements
    dc.all_gather(out, torch.tensor([1.0, 2.0, 3.0]))
    assert not out.is_contiguous()
    assert out.reshape(-1).tolist() == [1.0, 2.0, 3.0, 2.0, 3.0, 4.0]   # in logical order
    half = torch.zeros(2, dtype=torch.float64)
    dc.reduce_scatter(half, torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64), "max")
    assert half.tolist() == [3.0, 5.0]
    assert [c[0] for c in comm.calls] == ["all_reduce", "broadcast", "all_gather",
                                          "reduce_scatter"]


def test_staged_is_the_tensor_itself_on_the_cpu():
    t = torch.ones(3)
    with cuda.staged(t) as h:
        assert h is t
    assert not cuda.is_device(t) and cuda.is_device(torch.zeros(1, device="meta"))
