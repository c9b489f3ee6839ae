"""POSIX semaphores living in shared memory, for ranks that a launcher started.

A :class:`~msccl_py.runtime.process_group.ProcessGroup` hands its ranks
``multiprocessing`` semaphores, which only a common parent can create. Ranks
that torchrun or mpirun started meet as strangers, so a joined group keeps
its semaphores inside the arena (``sem_init`` with ``pshared=1``): each rank's
doorbell, its link's doorbell and the group lock. :class:`ShmSemaphore` gives
them the interface the executors use (``release``, ``acquire(block,
timeout)``, and ``handle``, the ``sem_t*`` the native executor posts).

>>> import mmap
>>> m = mmap.mmap(-1, 64)
>>> import numpy as np
>>> addr = np.frombuffer(m, dtype=np.uint8, count=1).ctypes.data
>>> sem = ShmSemaphore.create(addr, 1)
>>> sem.acquire(True, 0.01), sem.acquire(True, 0.01)
(True, False)
>>> sem.release(); sem.acquire(False)
True
"""

from __future__ import annotations

import ctypes
import errno
import os
import time

from msccl_py.errors import MscclRuntimeError


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(None, use_errno=True)
for _name, _args in (("sem_init", [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint]),
                     ("sem_post", [ctypes.c_void_p]), ("sem_trywait", [ctypes.c_void_p]),
                     ("sem_destroy", [ctypes.c_void_p]),
                     ("sem_timedwait", [ctypes.c_void_p, ctypes.POINTER(_Timespec)])):
    getattr(_libc, _name).argtypes = _args
    getattr(_libc, _name).restype = ctypes.c_int


class ShmSemaphore:
    """The ``sem_t`` at address ``handle`` (in a mapping the caller keeps alive)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    @classmethod
    def create(cls, handle: int, value: int = 0) -> ShmSemaphore:
        """Initialise a process-shared semaphore at ``handle`` with count ``value``."""
        if _libc.sem_init(handle, 1, value) != 0:
            err = ctypes.get_errno()
            raise MscclRuntimeError(f"cannot create a shared semaphore: {os.strerror(err)}")
        return cls(handle)

    def release(self) -> None:
        _libc.sem_post(self.handle)

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        """Take one count; with ``block``, wait up to ``timeout`` seconds (None: forever)."""
        if _libc.sem_trywait(self.handle) == 0:
            return True
        if not block:
            return False
        deadline = None if timeout is None else time.time() + timeout
        while True:
            t = time.time() + 3600 if deadline is None else deadline
            ts = _Timespec(int(t), int((t % 1) * 1e9))
            if _libc.sem_timedwait(self.handle, ctypes.byref(ts)) == 0:
                return True
            err = ctypes.get_errno()
            if err == errno.EINTR:
                continue
            if err == errno.ETIMEDOUT and deadline is None:
                continue
            return False
