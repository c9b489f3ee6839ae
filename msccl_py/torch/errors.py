"""The msccl backend's errors: each is both an msccl_py error and a ``torch.distributed`` one.

Training code catches ``torch.distributed.DistError`` (or ``DistBackendError``,
or ``RuntimeError``); msccl_py code catches ``MscclRuntimeError`` /
``SizeError``. Every error the backend raises is both, so either handler
catches it (``msccl_py.errors`` stays free of torch; the pairs are made here):

* a call the backend refuses (dtype, op): :class:`RefusedError`, an
  ``MscclRuntimeError`` and a ``DistError``; sizes that do not fit:
  :class:`SizesError`, a ``SizeError`` and a ``DistError``;
* a failure of the backend (a rank died, mismatched calls): :class:`BackendError`,
  an ``MscclRuntimeError`` and a ``DistBackendError``;
* no progress within the group's ``timeout``: :class:`CallTimeoutError`, an
  ``MscclDeadlockError`` and a ``DistBackendError``.

>>> import torch.distributed as dist
>>> issubclass(CallTimeoutError, dist.DistBackendError) and issubclass(SizesError, SizeError)
True
"""

from __future__ import annotations

import torch.distributed as dist

from msccl_py.errors import MscclDeadlockError, MscclError, MscclRuntimeError, SizeError


class RefusedError(MscclRuntimeError, dist.DistError):
    """A call the msccl backend does not take (a dtype, an op, a layout)."""


class SizesError(SizeError, dist.DistError):
    """Tensor sizes that do not fit the call."""


class BackendError(MscclRuntimeError, dist.DistBackendError):
    """The group failed: a rank raised or died, or the ranks made different calls."""


class CallTimeoutError(MscclDeadlockError, dist.DistBackendError):
    """A call made no progress for the group's ``timeout``; ``blamed`` are the ranks that
    had not entered it (empty when every rank had)."""

    def __init__(self, message: str, blamed: list[int]):
        super().__init__(message)
        self.blamed = blamed


def laggards(rt) -> list[int]:
    """The group ranks that have not entered this rank's current call (``rt``: its runtime)."""
    return [p for p in range(rt.world_size) if p != rt.rank and rt.control.seq(p) < rt.seq]


def translate(exc: MscclError, rt, what: str) -> Exception:
    """``exc`` (from the runtime, during ``what``) as the backend raises it (see the table)."""
    if isinstance(exc, dist.DistError):
        return exc
    if isinstance(exc, MscclDeadlockError):
        blamed = laggards(rt)
        who = (f"rank(s) {blamed} never entered call #{rt.seq}" if blamed else
               f"every rank entered call #{rt.seq} but it did not finish")
        err = CallTimeoutError(f"msccl {what} on rank {rt.rank}: Timed out after "
                            f"{rt.timeout:g} s (the group's timeout): {who}\n{exc}", blamed)
    elif isinstance(exc, SizeError):
        err = SizesError(str(exc))
    else:
        err = BackendError(f"msccl {what} on rank {rt.rank}: {exc}")
    err.__cause__ = exc
    return err
