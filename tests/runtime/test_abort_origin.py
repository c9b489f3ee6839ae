"""A recorded failure names the rank that failed, not the rank that noticed it."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.shm_exec import RankRuntime
from msccl_py.transport import shm_arena as A


@pytest.fixture
def two_ranks(make_arena):
    """Rank 0's runtime of a 2-rank arena (rank 1 only exists in the records)."""
    return RankRuntime(make_arena(2, 4096), 0, 2, [mp.Semaphore(0), mp.Semaphore(0)],
                       mp.Lock(), 5.0, os.getppid())


def _message(rt: RankRuntime) -> str:
    with pytest.raises(MscclRuntimeError) as info:
        rt._aborted(lambda: "waiting")
    return str(info.value)


def test_a_peer_seen_to_die_is_the_origin(two_ranks):
    """A joined rank's watcher records the dead peer (join.py), a link the rank another host
    reported (shm_link.py)."""
    assert two_ranks.abort(A.ABORT_DIED, "rank 1 (pid 7, host 'b') died", origin=1)
    assert two_ranks.abort_message() == (A.ABORT_DIED, 1, "rank 1 (pid 7, host 'b') died")
    assert _message(two_ranks).endswith("aborted because rank 1 failed: rank 1 (pid 7, host "
                                        "'b') died")


def test_without_origin_the_caller_failed(two_ranks):
    two_ranks.abort(A.ABORT_ERROR, "boom")
    assert "aborted because rank 0 failed: boom" in _message(two_ranks)


def test_a_broken_connection_names_no_rank(two_ranks):
    two_ranks.abort(A.ABORT_DIED, "rank 0 lost its connection to another host", origin=-1)
    assert "aborted because a connection between hosts broke: rank 0 lost its connection" \
        in _message(two_ranks)


def test_the_first_failure_wins(two_ranks):
    assert two_ranks.abort(A.ABORT_DIED, "first", origin=1)
    assert not two_ranks.abort(A.ABORT_ERROR, "second")
    assert two_ranks.abort_message()[1:] == (1, "first")
