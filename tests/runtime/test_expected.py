"""NumPy expected results of every collective."""

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.runtime.expected import expected, finish_avg


def alg(coll, g=2, n=4):
    return ir.Algorithm("x", coll, "Simple", False, g, n, 1)


X = [np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])]


def test_allreduce_ops():
    assert expected(alg("allreduce"), X)[1].tolist() == [11, 22, 33, 44]
    assert expected(alg("allreduce"), X, "max")[0].tolist() == [10, 20, 30, 40]
    assert expected(alg("allreduce"), X, "min")[0].tolist() == [1, 2, 3, 4]
    assert expected(alg("allreduce"), X, "prod")[0].tolist() == [10, 40, 90, 160]
    assert expected(alg("allreduce"), X, "avg")[0].tolist() == [5, 11, 16, 22]


def test_layouts():
    assert expected(alg("allgather"), X)[0].tolist() == [1, 2, 3, 4, 10, 20, 30, 40]
    assert [o.tolist() for o in expected(alg("reduce_scatter"), X)] == [[11, 22], [33, 44]]
    assert [o.tolist() for o in expected(alg("alltoall"), X)] == [[1, 2, 10, 20],
                                                                   [3, 4, 30, 40]]
    assert expected(alg("broadcast"), X, root=1)[0].tolist() == [10, 20, 30, 40]
    r = expected(alg("reduce"), X, root=1)
    assert r[0] is None and r[1].tolist() == [11, 22, 33, 44]


def test_avg_truncates_integers_and_divides_floats():
    assert finish_avg(np.array([-3, 3], np.int32), 2).tolist() == [-1, 1]
    assert finish_avg(np.array([3.0], np.float32), 2).tolist() == [1.5]


def test_errors():
    with pytest.raises(SizeError, match="needs 2 inputs"):
        expected(alg("allreduce"), X[:1])
    with pytest.raises(MscclRuntimeError, match="no NumPy reference result for collective"):
        expected(alg("custom"), X)
