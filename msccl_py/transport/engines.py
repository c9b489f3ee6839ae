"""The engines that carry a connection between hosts: gloo (torch.distributed) and MPI (mpi4py).

msccl_py has no network stack of its own: where two ranks of a connection
sit on different hosts, their FIFO slots travel over the engine the launch
already runs (:mod:`msccl_py.runtime.shm_link` decides what to send). An
engine moves *frames*: a fixed header of :data:`HEADER_WORDS` int64 words,
optionally followed by a payload (a contiguous NumPy array, sent from and
received into FIFO memory without a copy). Frames from one sender arrive in
the order it sent them; a receiver takes headers from any sender, then the
payload from the header's sender.

A :class:`Bootstrap` is the launch's own meeting point (torch's store under
torchrun, MPI's allgather under mpirun), used once at start-up to exchange
host names and arena addresses.

>>> HEADER_WORDS
16
"""

from __future__ import annotations

import collections
import pickle
import threading
import time
from typing import Any

import numpy as np

from msccl_py.errors import MscclRuntimeError

HEADER_WORDS = 16
#: engine tags of the frames; user point-to-point traffic keeps below FRAME_TAG
FRAME_TAG = 1 << 30
_HEADER_TAG, _PAYLOAD_TAG = FRAME_TAG, FRAME_TAG + 1
#: sends kept in flight before the oldest is waited for
_IN_FLIGHT = 64


class EngineClosed(MscclRuntimeError):
    """The engine was closed (or its connection to a peer broke) while a frame was awaited."""


class Bootstrap:
    """Exchange small values between every rank of a launch, once, at start-up."""

    rank: int
    size: int

    def allgather(self, value: Any) -> list:
        """Every rank's picklable ``value``, in rank order."""
        raise NotImplementedError

    def barrier(self) -> None:
        self.allgather(None)


class StoreBootstrap(Bootstrap):
    """Through a ``torch.distributed`` store (TCPStore under torchrun): keys under ``prefix``."""

    def __init__(self, store, rank: int, size: int, prefix: str = "msccl_py"):
        self.store, self.rank, self.size, self.prefix = store, rank, size, prefix
        self._round = 0

    def allgather(self, value: Any) -> list:
        self._round += 1
        key = f"{self.prefix}/{self._round}/"
        self.store.set(key + str(self.rank), pickle.dumps(value))
        return [pickle.loads(self.store.get(key + str(p))) for p in range(self.size)]


class MpiBootstrap(Bootstrap):
    """Through an mpi4py communicator's ``allgather``."""

    def __init__(self, comm):
        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()

    def allgather(self, value: Any) -> list:
        return self.comm.allgather(value)


def raw(payload: np.ndarray) -> np.ndarray:
    """A payload's bytes (a uint8 view, no copy): engines move bytes, and neither torch nor
    MPI takes every element type (bfloat16 travels as ``V2`` bit patterns)."""
    if not payload.flags.c_contiguous:
        raise MscclRuntimeError(f"an engine payload must be contiguous memory (a FIFO slot), "
                                f"got strides {payload.strides}")
    return payload.reshape(-1).view(np.uint8)


class Engine:
    """Frames between ranks (see the module docstring). Thread-safe: a link's sender and
    receiver threads and the caller share one engine."""

    name = "engine"

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size
        self._send_lock = threading.Lock()
        self._inflight: collections.deque = collections.deque()
        self.frames_sent = 0
        self.bytes_sent = 0

    def send(self, peer: int, header: np.ndarray, payload: np.ndarray | None = None) -> None:
        """Post one frame to ``peer``; ``payload`` must stay unchanged until it is delivered
        (a FIFO slot is: its sender waits for the receiver's credit before reusing it)."""
        header = np.ascontiguousarray(header, dtype=np.int64)
        with self._send_lock:
            reqs = [self._post_send(header, peer, _HEADER_TAG)]
            if payload is not None and payload.size:
                reqs.append(self._post_send(raw(payload), peer, _PAYLOAD_TAG))
                self.bytes_sent += payload.nbytes
            self.frames_sent += 1
            self._inflight.append((reqs, header, payload))
            while len(self._inflight) > _IN_FLIGHT:
                self._finish(self._inflight.popleft()[0])

    def flush(self) -> None:
        """Wait until every frame posted so far is delivered."""
        with self._send_lock:
            while self._inflight:
                self._finish(self._inflight.popleft()[0])

    def recv_header(self, header: np.ndarray) -> int:
        """Block for the next frame's header from any rank; returns the sender's rank."""
        raise NotImplementedError

    def recv_payload(self, peer: int, payload: np.ndarray) -> None:
        """Block for the payload of the frame whose header came from ``peer``."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _post_send(self, array: np.ndarray, peer: int, tag: int):
        raise NotImplementedError

    def _finish(self, reqs: list) -> None:
        raise NotImplementedError


class GlooEngine(Engine):
    """Frames over a ``torch.distributed`` gloo process group (CPU tensors viewing NumPy)."""

    name = "gloo"

    def __init__(self, group, rank: int, size: int):
        super().__init__(rank, size)
        import torch
        self.torch, self.group = torch, group

    @classmethod
    def from_store(cls, store, rank: int, size: int, timeout: float) -> GlooEngine:
        """A private gloo group over ``store`` (every rank of the launch must call this)."""
        from datetime import timedelta

        import torch.distributed as dist
        prefixed = dist.PrefixStore("msccl_py/gloo/", store)
        group = dist.ProcessGroupGloo(prefixed, rank, size, timedelta(seconds=timeout))
        return cls(group, rank, size)

    def _post_send(self, array: np.ndarray, peer: int, tag: int):
        return self.group.send([self.torch.from_numpy(array)], peer, tag)

    def _finish(self, reqs: list) -> None:
        for work in reqs:
            _gloo_wait(work, "a send")

    def recv_header(self, header: np.ndarray) -> int:
        work = self.group.recv_anysource([self.torch.from_numpy(header)], _HEADER_TAG)
        _gloo_wait(work, "a frame")
        return int(work._source_rank())

    def recv_payload(self, peer: int, payload: np.ndarray) -> None:
        _gloo_wait(self.group.recv([self.torch.from_numpy(raw(payload))], peer, _PAYLOAD_TAG),
                   f"a payload from rank {peer}")


def _gloo_wait(work, what: str) -> None:
    try:
        work.wait()
    except RuntimeError as exc:
        raise EngineClosed(f"gloo failed while waiting for {what}: {exc}") from exc


class MpiEngine(Engine):
    """Frames over an mpi4py communicator (a duplicate of the launch's, so tags never meet
    the application's). Receives poll with a growing sleep: a blocking MPI receive spins
    a core, which ranks sharing cores cannot afford."""

    name = "mpi"

    def __init__(self, comm):
        super().__init__(comm.Get_rank(), comm.Get_size())
        from mpi4py import MPI
        self.MPI, self.comm = MPI, comm.Dup()
        self._closed = threading.Event()

    def _post_send(self, array: np.ndarray, peer: int, tag: int):
        return self.comm.Isend(array, dest=peer, tag=tag)

    def _finish(self, reqs: list) -> None:
        for req in reqs:
            self._poll(req, "a send")

    def _poll(self, req, what: str, status=None) -> None:
        nap = 0.0
        while not req.Test(status):
            if self._closed.is_set():
                req.Cancel()
                raise EngineClosed(f"the MPI engine closed while waiting for {what}")
            time.sleep(nap)
            nap = min(2e-3, nap * 2 + 2e-5)

    def recv_header(self, header: np.ndarray) -> int:
        status = self.MPI.Status()
        req = self.comm.Irecv(header, source=self.MPI.ANY_SOURCE, tag=_HEADER_TAG)
        self._poll(req, "a frame", status)
        return int(status.Get_source())

    def recv_payload(self, peer: int, payload: np.ndarray) -> None:
        self._poll(self.comm.Irecv(raw(payload), source=peer, tag=_PAYLOAD_TAG),
                   f"a payload from rank {peer}")

    def close(self) -> None:
        self._closed.set()
