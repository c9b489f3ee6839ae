"""CUDA tensors in the ``msccl`` backend: the CuPy IPC runtime, zero-copy through DLPack.

On one host, a CUDA tensor's collective runs on
:class:`~msccl_py.runtime.cupy.ipc.GpuCommunicator` (one GPU per rank, IPC
between them): the tensor is handed to CuPy with ``cupy.from_dlpack`` (no
copy) and the result comes back through ``torch.from_dlpack``. What that
runtime does not run (rooted gathers and scatters, all-to-all with splits,
point-to-point, calls whose size the program's chunks do not divide, a
launch across hosts) goes through host memory: :func:`staged` copies the
tensor to the CPU, the shm runtime runs the call, and the result is copied
back. Without a GPU nothing here runs but the host staging, which the
tests exercise with CPU tensors.
"""

from __future__ import annotations

import contextlib

import torch

from msccl_py.errors import SizeError
from msccl_py.torch.tensors import Staged


def is_device(t: torch.Tensor) -> bool:
    """True for a tensor the CPU path cannot read in place (CUDA and other devices)."""
    return t.device.type != "cpu"


@contextlib.contextmanager
def staged(t: torch.Tensor, read: bool = True, write: bool = True):
    """``t`` itself for a CPU tensor; else a host copy (``read``: of its values), copied back
    on success when ``write``."""
    if not is_device(t):
        yield t
        return
    host = t.detach().to("cpu") if read else torch.empty(t.shape, dtype=t.dtype)
    yield host
    if write:
        with torch.no_grad():
            t.copy_(host)


def to_cupy(t: torch.Tensor):
    """A CuPy array on ``t``'s memory (DLPack: no copy), flat."""
    import cupy
    return cupy.from_dlpack(t.detach().contiguous()).reshape(-1)


def from_cupy(a) -> torch.Tensor:
    """A torch tensor on CuPy array ``a``'s memory (DLPack: no copy)."""
    return torch.from_dlpack(a)


class DeviceCollectives:
    """The GPU runtime for one rank's CUDA tensors, over the rank's CPU communicator
    (``comm``: exchanges IPC handles; its layout says whether one host holds every rank)."""

    def __init__(self, comm):
        self.comm = comm
        self.reason = self._unusable()
        self._gpu = None

    def _unusable(self) -> str | None:
        if len(self.comm.layout.hosts) > 1:
            return "CUDA IPC reaches one host only; the launch spans several"
        from msccl_py.runtime.cupy.device import unavailable_reason
        return unavailable_reason()

    def _device(self, t: torch.Tensor):
        if self.reason is not None:
            return None
        if self._gpu is None:
            from msccl_py.runtime.cupy.ipc import GpuCommunicator
            self._gpu = GpuCommunicator(self.comm, t.device.index or 0)
        return self._gpu

    def _run(self, t: torch.Tensor, out: torch.Tensor, device_call, host_call) -> None:
        """``device_call(gpu, cupy input)`` writes ``out``; else ``host_call`` through the host."""
        gpu = self._device(t)
        if gpu is not None:
            try:
                res = device_call(gpu, to_cupy(t))
            except SizeError:
                res = None      # sizes the program's chunks do not divide: the host path pads
            if res is not None:
                with torch.no_grad():
                    out.reshape(-1).copy_(from_cupy(res).reshape(-1))
                return
        host_call()

    def _in_place(self, t: torch.Tensor, host_call, device_call) -> None:
        """A collective whose result overwrites ``t``: ``host_call(array)`` computes it in
        place on ``t``'s host copy when the device path cannot."""
        def host() -> None:
            with staged(t) as h:
                s = Staged(h)
                host_call(s.array)
                s.commit()
        self._run(t, t, device_call, host)

    def _into(self, out: torch.Tensor, t: torch.Tensor, host_call, device_call) -> None:
        """A collective from ``t`` into ``out``: ``host_call(input, output)`` on host copies
        when the device path cannot."""
        def host() -> None:
            with staged(t, write=False) as hi, staged(out, read=False) as ho:
                d = Staged(ho, read=False)
                host_call(Staged(hi).array, d.array)
                d.commit()
        self._run(t, out, device_call, host)

    def all_reduce(self, t: torch.Tensor, op: str) -> None:
        self._in_place(t, lambda a: self.comm.all_reduce(a, op, out=a),
                       lambda g, x: g.all_reduce(x, op))

    def broadcast(self, t: torch.Tensor, root: int) -> None:
        self._in_place(t, lambda a: self.comm.broadcast(a, root, out=a),
                       lambda g, x: g.broadcast(x, root))

    def all_gather(self, out: torch.Tensor, t: torch.Tensor) -> None:
        self._into(out, t, lambda a, o: self.comm.all_gather(a, out=o),
                   lambda g, x: g.all_gather(x))

    def reduce_scatter(self, out: torch.Tensor, t: torch.Tensor, op: str) -> None:
        self._into(out, t, lambda a, o: self.comm.reduce_scatter(a, op, out=o),
                   lambda g, x: g.reduce_scatter(x, op))

    def close(self) -> None:
        if self._gpu is not None:
            self._gpu.close()
            self._gpu = None

