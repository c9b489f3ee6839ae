"""Run a deterministic computation in a forked child while the caller goes on.

A large program's verification (a fifth of its compile) needs nothing the
judge and the writer produce, so on a machine with a second core it runs
beside them: the compile then takes the longer of the two paths, not their
sum. The outcome never depends on whether it did: the child sends back its
result pickled through a pipe, and on anything else (an exception, a result
that does not pickle, the child killed, no fork here) :meth:`Beside.result`
runs the computation in the caller, so errors are raised exactly as they
would be in-process.

Forking is used only where it is safe: on Linux, in a process running one
Python thread (a fork copies only the calling thread, and a lock another
thread holds stays held in the child). Native worker pools, such as the one
NumPy's BLAS starts at import, stay idle and are not used by the child. The
child leaves with ``os._exit``: no atexit hooks, no flushing of output the
parent buffered.

>>> job = Beside(sum, ([1, 2, 3],))
>>> job.result()
6
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from typing import Any, Callable


def can_fork() -> bool:
    """Whether a fork is safe here: Linux, and one Python thread."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and threading.active_count() == 1)


class Beside:
    """``fn(*args)`` started in a forked child when :func:`can_fork`; :meth:`result` waits
    for it (or computes it in the caller), :meth:`cancel` stops it."""

    def __init__(self, fn: Callable[..., Any], args: tuple = ()) -> None:
        self.fn, self.args = fn, args
        self.pid = -1
        self.fd = -1
        if not can_fork():
            return
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the child: compute, send, leave without cleanup
            status = 1
            try:
                os.close(r)
                view = memoryview(pickle.dumps(fn(*args), pickle.HIGHEST_PROTOCOL))
                while view:
                    view = view[os.write(w, view):]
                status = 0
            except BaseException:  # noqa: BLE001 - the parent computes it again and raises
                pass
            finally:
                os._exit(status)
        os.close(w)
        self.pid, self.fd = pid, r

    @property
    def running(self) -> bool:
        """Whether a child computes it (False: :meth:`result` will, in the caller)."""
        return self.pid >= 0

    def result(self) -> Any:
        """The computation's result (the child's, or computed here when it gave none)."""
        if self.pid < 0:
            return self.fn(*self.args)
        with os.fdopen(self.fd, "rb") as pipe:
            data = pipe.read()
        self.fd = -1
        _, status = os.waitpid(self.pid, 0)
        self.pid = -1
        if status == 0 and data:
            try:
                return pickle.loads(data)
            except Exception:  # noqa: BLE001 - fall back to computing it here
                pass
        return self.fn(*self.args)

    def cancel(self) -> None:
        """Stop the child if it still runs (the caller no longer needs the result)."""
        if self.pid < 0:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.pid = self.fd = -1
