"""What each op does with its data: one table for every runtime, its symbolic twin beside it.

:data:`MOVES` ``[op](ufunc, src, dst, acc, rs, ss)`` performs one transfer of
plan op code ``op`` on equal-length arrays: ``src``/``dst`` the step's local
source and destination (where the op has them), ``acc`` what a local
``reduce`` accumulates from, ``rs``/``ss`` the received data and the data to
send. The reference runtime, the shm runtime's Python executor and the CuPy
host path all dispatch through it (NumPy's ``copyto`` and ufuncs dispatch to
CuPy for CuPy arrays). :data:`SYMBOLIC` is the same table on one chunk's
symbolic value, ``join`` standing for the reduction: the verifier's data
model (:mod:`msccl_py.verify.data`) computes it in its own tuned loop, and
the tests hold the two against each other. The C++ and CUDA executors
(``shm_exec.cpp``, ``interp.h``) switch on the same op codes
(:func:`msccl_py.plan.tables.check_op_enum`).

>>> import numpy as np
>>> rs, src, dst = np.array([1., 2.]), np.array([10., 20.]), np.zeros(2)
>>> MOVES[OP_RRC](np.add, src, dst, None, rs, None)
>>> dst.tolist()
[11.0, 22.0]
>>> SYMBOLIC[OP_RRCS](lambda a, b: a + b, "x", None, "y")
('yx', 'yx')
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from msccl_py.plan.tables import (OP_COPY, OP_NAMES, OP_RCS, OP_RECV, OP_REDUCE, OP_RRC,
                                  OP_RRCS, OP_RRS, OP_SEND)

_copyto = np.copyto


def _send(ufunc, src, dst, acc, rs, ss) -> None:
    _copyto(ss, src)


def _recv(ufunc, src, dst, acc, rs, ss) -> None:
    _copyto(dst, rs)


def _recv_copy_send(ufunc, src, dst, acc, rs, ss) -> None:
    _copyto(dst, rs)
    if ss is not rs:   # a runtime may forward the received buffer itself
        _copyto(ss, rs)


def _recv_reduce_send(ufunc, src, dst, acc, rs, ss) -> None:
    ufunc(rs, src, out=ss)


def _recv_reduce_copy(ufunc, src, dst, acc, rs, ss) -> None:
    ufunc(rs, src, out=dst)


def _recv_reduce_copy_send(ufunc, src, dst, acc, rs, ss) -> None:
    ufunc(rs, src, out=dst)
    _copyto(ss, dst)


def _copy(ufunc, src, dst, acc, rs, ss) -> None:
    _copyto(dst, src)


def _reduce(ufunc, src, dst, acc, rs, ss) -> None:
    ufunc(acc, src, out=dst)


_BY_OP = {OP_SEND: _send, OP_RECV: _recv, OP_RCS: _recv_copy_send, OP_RRS: _recv_reduce_send,
          OP_RRC: _recv_reduce_copy, OP_RRCS: _recv_reduce_copy_send, OP_COPY: _copy,
          OP_REDUCE: _reduce}
#: ``MOVES[op](ufunc, src, dst, acc, rs, ss)`` performs one transfer of ``op``
MOVES: tuple[Callable, ...] = tuple(_BY_OP[op] for op in range(len(OP_NAMES)))

#: ``SYMBOLIC[op](join, src, dst, received) -> (new dst value or None, sent value or None)``
#: on one chunk's value: the symbolic twin of :data:`MOVES`
SYMBOLIC: tuple[Callable, ...] = tuple({
    OP_SEND: lambda join, src, dst, rs: (None, src),
    OP_RECV: lambda join, src, dst, rs: (rs, None),
    OP_RCS: lambda join, src, dst, rs: (rs, rs),
    OP_RRS: lambda join, src, dst, rs: (None, join(rs, src)),
    OP_RRC: lambda join, src, dst, rs: (join(rs, src), None),
    OP_RRCS: lambda join, src, dst, rs: (join(rs, src), join(rs, src)),
    OP_COPY: lambda join, src, dst, rs: (src, None),
    OP_REDUCE: lambda join, src, dst, rs: (join(dst, src), None),
}[op] for op in range(len(OP_NAMES)))
