"""The progress thread of a group (msccl_py.torch.worker), in one process."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

pytest.importorskip("torch.distributed")

from msccl_py.torch.errors import BackendError, CallTimeoutError  # noqa: E402
from msccl_py.torch.worker import Worker  # noqa: E402


def test_calls_run_in_issue_order_and_inline_waits_for_them():
    w = Worker("t")
    seen = []

    def slow(k):
        def call():
            time.sleep(0.01)
            seen.append(k)
            return [k]
        return call
    works = [w.submit(slow(k)) for k in range(5)]
    assert w.inline(lambda: seen.append("sync") or len(seen)) == 6
    assert seen == [0, 1, 2, 3, 4, "sync"]
    assert all(x.is_completed() and x.is_success() for x in works)
    assert works[2].get_future().wait() == [2] and works[3].result() == [3]
    w.close()


def test_submit_returns_before_the_call_runs():
    w = Worker("t")
    gate = threading.Event()
    work = w.submit(lambda: gate.wait() and [])
    assert not work.is_completed()
    with pytest.raises(CallTimeoutError, match="timed out after 0.05 s"):
        work.wait(timedelta(seconds=0.05))
    gate.set()
    assert work.wait() is True
    w.close()


def test_errors_reach_wait_and_the_future():
    w = Worker("t")
    work = w.submit(lambda: (_ for _ in ()).throw(BackendError("rank 1 died")))
    with pytest.raises(BackendError, match="rank 1 died"):
        work.wait()
    assert isinstance(work.exception(), BackendError)
    with pytest.raises(Exception, match="rank 1 died"):
        work.get_future().wait()
    w.close()
    with pytest.raises(BackendError, match="shut down"):
        w.submit(lambda: None)
