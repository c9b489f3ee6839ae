"""The one data-move table: the numeric moves do what their symbolic twin says, for every op."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py.plan import tables as P
from msccl_py.plan.moves import MOVES, SYMBOLIC


@pytest.mark.parametrize("op", range(len(P.OP_NAMES)), ids=P.OP_NAMES)
def test_numeric_move_matches_its_symbolic_twin(op):
    src, dst0, rs = np.array([10.0, 20.0]), np.array([1.0, 2.0]), np.array([100.0, 200.0])
    dst, ss = dst0.copy(), np.full(2, np.nan)
    MOVES[op](np.add, src.copy() if P.LOCAL_SRC[op] else None,
              dst if P.LOCAL_DST[op] else None, dst, rs.copy() if P.IS_RECV[op] else None,
              ss if P.IS_SEND[op] else None)
    want_dst, want_sent = SYMBOLIC[op](np.add, src, dst0, rs)
    np.testing.assert_array_equal(dst, dst0 if want_dst is None else want_dst)
    assert (want_sent is None) == (not P.IS_SEND[op])
    if want_sent is not None:
        np.testing.assert_array_equal(ss, want_sent)
    # an op writes its local destination exactly when the table says it has one
    assert (want_dst is not None) == bool(P.LOCAL_DST[op])


def test_forwarding_the_received_buffer_itself_is_allowed():
    rs, dst = np.array([3.0]), np.zeros(1)
    MOVES[P.OP_RCS](np.add, None, dst, None, rs, rs)
    assert dst.tolist() == [3.0] and rs.tolist() == [3.0]
