"""A rank killed in the middle of a call under torchrun: everyone stops, nothing is left.

Two ``torchrun --nnodes 2`` invocations (hosts ``node0``, ``node1``) loop on
4 MiB all_reduces; rank 3 (on node1) is killed with SIGKILL from a timer
thread, so inside a call. Rank 2 sees it die (its host's watcher) and its
link forwards the failure to node0 over gloo, unless node0's links see
rank 3's connection break first; either way every survivor raises, says
why, and exits; each torchrun reports the failure. The
collectives' timeout is 20 s: the job must end well within it of the kill.
"""

from __future__ import annotations

import re
import time

import pytest

from launching import free_port

pytest.importorskip("torch")

TIMEOUT = 20.0


@pytest.mark.slow
def test_rank_killed_mid_call_ends_both_torchruns(launches):
    from test_join_torchrun import two_nodes
    runs = two_nodes(launches, free_port(), ["die", "3"], 300, WORKER_TIMEOUT=str(TIMEOUT))
    ended = time.time()
    (rc0, out0, err0), (rc1, out1, err1) = runs
    assert rc0 != 0 and rc1 != 0
    killed = float(re.search(r"KILLED at (\S+)", out1).group(1))
    assert ended - killed < TIMEOUT, f"the job ended {ended - killed:.1f} s after the kill"
    assert out0.count("READY") == 2 and out1.count("READY") == 2
    # torchrun says which process failed and how
    assert "ChildFailedError" in err1 and re.search(r"rank\s*: 3 .*\n.*exitcode\s*: -9", err1)
    assert "ChildFailedError" in err0 and re.search(r"exitcode\s*: 1\b", err0)
    # each survivor on node0 says what happened: rank 3's death, as rank 2 reported it,
    # or, when rank 3's connection broke before that report arrived, the broken connection
    # (no rank is blamed for it)
    died = (r"aborted because rank 3 failed: rank 3 \(pid \d+, host 'node1'\) died "
            r"\(reported by rank 2 on another host\)")
    broke = (r"aborted because a connection between hosts broke: rank [01] lost its "
             r"connection to another host \(a rank there died or its host went away\): gloo")
    for r in (0, 1):
        assert re.search(rf"rank {r}: call #\d+ ({died}|{broke})", err0), err0[-3000:]
    assert not re.search(r"aborted because rank [012] failed", err0 + err1)
    # and leave quietly: no traceback from the exit handler's close, no abort() at exit
    # (gloo waking the link's receiver during interpreter shutdown)
    assert "Exception ignored in atexit" not in err0 + err1
    assert "terminate called" not in err0 + err1 and "SIGABRT" not in err0 + err1
    print(f"job ended {ended - killed:.1f} s after the kill")
