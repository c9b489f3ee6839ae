"""A computation run in a forked child gives the caller what computing it in place gives."""

from __future__ import annotations

import os
import time

import pytest

from msccl_py import toolchain
from msccl_py.errors import LoweringError, MscclError
from msccl_py.language import Buffer, MSCCLProgram, ThreadblockPolicy, chunk
from msccl_py.language.collectives import AllReduce
from msccl_py.toolchain import beside, pipeline
from msccl_py.topologies import fully_connected

needs_fork = pytest.mark.skipif(not beside.can_fork(), reason="no safe fork here")


def _pid_and(x):
    return os.getpid(), x * 2


def _fail(msg):
    raise MscclError(msg)


@needs_fork
def test_the_child_computes_it_and_the_caller_gets_its_result():
    job = beside.Beside(_pid_and, (21,))
    assert job.running
    pid, value = job.result()
    assert value == 42 and pid != os.getpid()
    assert not job.running


def test_without_a_fork_the_caller_computes_it(monkeypatch):
    monkeypatch.setattr(beside, "can_fork", lambda: False)
    job = beside.Beside(_pid_and, (21,))
    assert not job.running
    assert job.result() == (os.getpid(), 42)


@needs_fork
def test_an_error_in_the_child_is_raised_as_the_caller_would_raise_it():
    job = beside.Beside(_fail, ("no such thing",))
    with pytest.raises(MscclError, match="no such thing"):
        job.result()


@needs_fork
def test_a_result_that_does_not_pickle_is_computed_again_in_the_caller():
    job = beside.Beside(lambda: (os.getpid(), lambda: None), ())
    pid, fn = job.result()
    assert pid == os.getpid() and callable(fn)


@needs_fork
def test_cancel_stops_the_child():
    job = beside.Beside(time.sleep, (30,))
    pid = job.pid
    start = time.monotonic()
    job.cancel()
    assert time.monotonic() - start < 10 and not job.running
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_python_thread_rules_out_forking():
    import threading
    ev = threading.Event()
    t = threading.Thread(target=ev.wait)
    t.start()
    try:
        assert not beside.can_fork()
    finally:
        ev.set()
        t.join()


def ring(n: int, instances: int, wrong: bool = False) -> MSCCLProgram:
    """Ring allreduce with manual threadblocks; ``wrong`` leaves out one allgather hop."""
    prog = MSCCLProgram("ring", fully_connected(n), AllReduce(n, n, True), instances,
                        threadblock_policy=ThreadblockPolicy.manual)
    with prog:
        for step in range(n - 1):
            for k in range(n):
                chunk((k + step + 1) % n, Buffer.input, k).reduce(
                    chunk((k + step) % n, Buffer.input, k), sendtb=0, recvtb=0, ch=0)
        for step in range(n - 1):
            for k in range(n):
                if not (wrong and step == n - 2 and k == 0):
                    chunk((k + step - 1) % n, Buffer.input, k).copy(
                        (k + step) % n, Buffer.input, k, sendtb=0, recvtb=0, ch=0)
    return prog


def _compile(rec, fork: bool, monkeypatch):
    monkeypatch.setattr(pipeline, "LARGE_PROGRAM", 1)  # every program verifies beside
    monkeypatch.setattr(beside, "can_fork", (lambda: True) if fork else (lambda: False))
    return toolchain.compile(rec, "msccl")


@needs_fork
@pytest.mark.parametrize("instances", [1, 3])
def test_verifying_beside_gives_the_artifact_of_verifying_in_place(instances, monkeypatch):
    rec = ring(4, instances).recording()
    forked = _compile(rec, True, monkeypatch)
    here = _compile(rec, False, monkeypatch)
    assert forked.text == here.text and forked.notes == here.notes
    assert forked.verdict.status == here.verdict.status == "ok"
    assert str(forked.verdict) == str(here.verdict)
    assert forked.lowered[0] is not None and (forked.lowered[1] is None) == (instances == 1)


@needs_fork
def test_a_refusal_by_the_verifier_beside_is_the_refusal_in_place(monkeypatch):
    from msccl_py.verify import Verdict
    bad = Verdict("incorrect", "rank 0 output chunk 0 holds nothing")
    monkeypatch.setattr("msccl_py.verify.verify", lambda *a, **k: bad)
    rec = ring(3, 2).recording()
    errors = []
    for fork in (True, False):
        with pytest.raises(LoweringError) as exc:
            _compile(rec, fork, monkeypatch)
        errors.append(str(exc.value))
    assert errors[0] == errors[1] and "does not reproduce" in errors[0]



def bounce_chunks(k: int, instances: int) -> MSCCLProgram:
    """Rank 0's k chunks, one at a time, to rank 1 and back on one threadblock each way:
    more chunks than a FIFO holds deadlock at every size (one-chunk steps model alike)."""
    from tests.toolchain.test_pipeline import Bounce
    prog = MSCCLProgram("bounce", fully_connected(2), Bounce(2, k, False), instances,
                        threadblock_policy=ThreadblockPolicy.manual)
    with prog:
        there = [chunk(0, Buffer.input, i).copy(1, "tmp", i, sendtb=0, recvtb=0)
                 for i in range(k)]
        for i, c in enumerate(there):
            c.copy(0, Buffer.output, i, sendtb=0, recvtb=0)
    return prog


@needs_fork
@pytest.mark.parametrize("k", [2, 10])
def test_a_replicated_program_verified_beside_is_verified_as_in_place(k, monkeypatch):
    """Two instances (replicated after lowering, so the child has only the base): k=2 runs,
    k=10 deadlocks everywhere and is refused with the same message either way."""
    rec = bounce_chunks(k, 2).recording()
    outcomes = []
    for fork in (True, False):
        try:
            art = _compile(rec, fork, monkeypatch)
            outcomes.append((art.verdict.status, art.text, art.notes))
        except MscclError as exc:
            outcomes.append((type(exc).__name__, str(exc)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == ("ok" if k == 2 else "VerificationError")
