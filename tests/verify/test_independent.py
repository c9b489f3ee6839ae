"""The verifier's verdicts agree with an independent slice-level simulator (tests/verify/independent.py).

The XML files in tests/data/verify/ are not in the corpus; each is run in both
message-size regimes (a small FIFO buffer keeps the sizes tiny) by the
independent simulator and by ``verify(..., nbytes=...)`` and, where it does
not deadlock, by the reference runtime.
"""

from pathlib import Path

import numpy as np
import pytest

from msccl_py.errors import MscclDeadlockError
from msccl_py.runtime import reference
from msccl_py.runtime.expected import expected
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml

from . import independent

DATA = Path(__file__).resolve().parents[1] / "data" / "verify"
FILES = sorted(DATA.glob("*.xml"))
BUFFSIZE = 1024


def sizes(alg):
    """Elements per chunk (int64) for the large and the small regime."""
    per_iter = max(1, independent.iteration_bytes(alg.protocol, BUFFSIZE) // 8)
    maxc = max(st.count for _, tb in alg.threadblocks() for st in tb.steps)
    return {"large": 2 * per_iter, "small": max(1, per_iter // maxc)}


def independent_status(alg, S):
    out, inputs = independent.run(alg, S, BUFFSIZE)
    if out.deadlock:
        return "deadlock"
    want = expected(alg, inputs)
    ok = all(e is None or np.array_equal(o, e) for o, e in zip(out.outputs, want))
    return "ok" if ok else "incorrect"


def test_data_files_present():
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
@pytest.mark.parametrize("regime", ["small", "large"])
def test_verdict_matches_independent_simulator(path, regime):
    alg = read_xml(path)
    S = sizes(alg)[regime]
    truth = independent_status(alg, S)
    v = verify(alg, target="msccl", nbytes=alg.nchunksperloop * S * 8, itemsize=8,
               buffsize=BUFFSIZE)
    assert v.status == truth, v.report()
    maxc = max(st.count for _, tb in alg.threadblocks() for st in tb.steps)
    # with every count 1 a transfer is one chunk either way: both regimes are "small"
    assert list(v.regimes) == [regime if maxc > 1 else "small"]
    # the reference runtime, on the same geometry, agrees too
    inputs = [np.arange(n, dtype=np.int64) for n in
              (int(c) * S for c in reference.plan_for(alg).call_chunks[:, 0])]
    if truth == "deadlock":
        with pytest.raises(MscclDeadlockError):
            reference.run(alg, inputs, buffsize=BUFFSIZE)
    else:
        outs = reference.run(alg, inputs, buffsize=BUFFSIZE)
        good = all(e is None or np.array_equal(o, e)
                   for o, e in zip(outs, expected(alg, inputs)))
        assert good == (truth == "ok")


EXPECTED = {  # file stem -> (small, large) truth, decided by reading each program
    "allpairs_allreduce_3_simple": ("ok", "deadlock"),
    "allpairs_allreduce_4_ll": ("ok", "ok"),
    "broadcast_tree_4_simple": ("ok", "ok"),
    "reduce_chain_3_ll": ("ok", "ok"),
    "ring_allgather_3_depcycle": ("deadlock", "deadlock"),
    "ring_allgather_4_race": ("incorrect", "incorrect"),
    "ring_allgather_5_simple": ("ok", "ok"),
    "ring_allreduce_3_doublecount": ("incorrect", "incorrect"),
    "ring_allreduce_4x1_cnt2_ll": ("ok", "ok"),
    "ring_allreduce_4x1_cnt2_simple": ("ok", "deadlock"),
    "ring_allreduce_6x2_ll128": ("ok", "ok"),
}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_expected_table(path):
    alg = read_xml(path)
    s = sizes(alg)
    got = tuple(independent_status(alg, s[k]) for k in ("small", "large"))
    assert got == EXPECTED[path.stem]
