"""A group's progress thread: asynchronous calls run there, in the order they were issued.

``async_op=True`` (``opts.asyncOp``, also what C++ callers such as DDP's
reducer and the functional collectives pass) makes the backend hand the
call to :meth:`Worker.submit`, which returns a :class:`AsyncWork` at once.
The group's one thread runs the calls first in, first out; a synchronous
call first waits for the queue to drain, then runs in the caller's thread
(:meth:`Worker.inline`: no thread hand-off, so small calls stay fast). Both
hold the group's run lock, so the runtime serves one call at a time per
group; different groups have their own thread and arena and overlap.

The thread starts with the first asynchronous call and is a daemon: it holds
nothing that must be flushed at exit.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist


class AsyncWork(dist.Work):
    """The Work of a queued call: ``wait()`` blocks until the call ran (raising its error),
    ``get_future()`` completes with the call's value (gloo's value for the same call)."""

    def __init__(self):
        super().__init__()
        self._done = threading.Event()
        self._future = torch.futures.Future()
        self._value = None
        self._error: BaseException | None = None

    def _finish(self, value, error: BaseException | None) -> None:
        self._value, self._error = value, error
        self._done.set()
        # callbacks of the future run here, in the progress thread, as with gloo's
        if error is None:
            self._future.set_result(value)
        else:
            self._future.set_exception(error)

    def wait(self, timeout: timedelta | None = None) -> bool:
        limit = None
        if timeout is not None and timeout.total_seconds() > 0:
            limit = timeout.total_seconds()
        if not self._done.wait(limit):
            from msccl_py.torch.errors import CallTimeoutError
            raise CallTimeoutError(f"msccl: Work.wait() timed out after {limit:g} s; the "
                                   f"call is still queued or running", [])
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._done.is_set()

    def is_success(self) -> bool:
        return self._done.is_set() and self._error is None

    def exception(self):
        return self._error

    def result(self) -> list:
        self.wait()
        return self._value if isinstance(self._value, list) else [self._value]

    def get_future(self) -> torch.futures.Future:
        return self._future


class Worker:
    """One group's queue of asynchronous calls and the thread that runs them."""

    def __init__(self, name: str):
        self.name = name
        self.run_lock = threading.Lock()
        self._cv = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, call: Callable[[], object]) -> AsyncWork:
        """Queue ``call`` (it returns the future's value); its Work, at once."""
        work = AsyncWork()
        with self._cv:
            if self._closed:
                from msccl_py.torch.errors import BackendError
                raise BackendError(f"msccl group {self.name} is shut down")
            self._queue.append((call, work))
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name=f"msccl_py-progress-{self.name}")
                self._thread.start()
            self._cv.notify_all()
        return work

    def inline(self, call: Callable[[], object]):
        """Run ``call`` here after every queued call (the order the ranks agree on)."""
        if self._pending and threading.current_thread() is not self._thread:
            self.drain()
        with self.run_lock:
            return call()

    def drain(self) -> None:
        """Wait until every queued call has run."""
        with self._cv:
            while self._pending:
                self._cv.wait()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if not self._queue:
                    return
                call, work = self._queue.popleft()
            value, error = None, None
            try:
                with self.run_lock:
                    value = call()
            except BaseException as exc:    # goes to the caller's wait()
                error = exc
            with self._cv:
                self._pending -= 1
                self._cv.notify_all()
            work._finish(value, error)

    def close(self) -> None:
        """Run what is queued, then stop the thread."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
