"""HiGHS (``highspy``, the ``synth`` extra), quiet, behind the few calls synthesis makes.

HiGHS prints a banner from C++ when the first solver object is made; it is
sent to the null device so ``--json`` output stays clean.

>>> import numpy as np
>>> h = new_highs()                               # min T with 2 T >= 3
>>> add_rows(h, np.array([3.0]), np.array([np.inf]))
>>> add_col(h, 1.0, 0.0, np.inf, np.array([0]), np.array([2.0]))
>>> _ = h.run(); h.getSolution().col_value[0]
1.5
"""

from __future__ import annotations

import os
import sys

import numpy as np

from msccl_py.errors import MscclError

_made = False


def available() -> bool:
    """True when highspy can be imported."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def new_highs():
    """A silent ``highspy.Highs`` object; a clear error when highspy is not installed."""
    global _made
    try:
        import highspy
    except ImportError:
        raise MscclError("synthesis needs HiGHS, which is not installed; "
                         "pip install 'msccl-py[synth]' (or pip install highspy)") from None
    if _made:
        h = highspy.Highs()
    else:
        h = _quietly(highspy.Highs)
        _made = True
    h.setOptionValue("output_flag", False)
    h.setOptionValue("log_to_console", False)
    return h


def _quietly(make):
    """Call ``make()`` with file descriptor 1 pointed at the null device."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return make()
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            return make()
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def add_rows(h, lower: np.ndarray, upper: np.ndarray) -> None:
    """Empty rows with these bounds."""
    k = len(lower)
    h.addRows(k, np.asarray(lower, float), np.asarray(upper, float), 0,
              np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, float))


def add_col(h, cost: float, lower: float, upper: float, rows: np.ndarray,
            values: np.ndarray) -> None:
    """One column with its nonzeros."""
    h.addCol(float(cost), float(lower), float(upper), len(rows),
             np.asarray(rows, np.int32), np.asarray(values, float))


def packing_lp(groups: int, capacity: np.ndarray):
    """The column-generation LP the packings share: ``min T`` with every group's column
    weights summing to 1 (rows ``0..groups-1``) and every resource's load within
    ``capacity * T`` (rows ``groups..``); column 0 is ``T``."""
    h = new_highs()
    nres = len(capacity)
    add_rows(h, np.ones(groups), np.ones(groups))
    add_rows(h, np.full(nres, -np.inf), np.zeros(nres))
    add_col(h, 1.0, 0.0, np.inf, groups + np.arange(nres), -np.asarray(capacity, float))
    return h


def add_column(h, group: int, groups: int, load: np.ndarray) -> None:
    """A column of ``packing_lp``: weight 1 in ``group``'s row, ``load`` on the resources."""
    nz = np.nonzero(load)[0]
    add_col(h, 0.0, 0.0, np.inf, np.concatenate([[group], groups + nz]),
            np.concatenate([[1.0], load[nz]]))


def price_round(h, incidence, groups: int, target: float | None
                ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """Solve ``packing_lp`` once: ``(T, group duals, hop prices)``; the duals and prices
    are None when ``T`` reached ``target`` (a known lower bound: nothing left to price).

    A hop's price is what its resources cost at the optimum (``incidence``: hops x
    resources); a new column helps when its hops cost less than its group's dual.
    """
    h.run()
    sol = h.getSolution()
    t_now = float(sol.col_value[0])
    if target is not None and t_now <= target * (1 + 1e-9):
        return t_now, None, None
    duals = np.asarray(sol.row_dual)
    price = np.maximum(-(incidence @ duals[groups:]), 0.0)
    return t_now, duals[:groups], price


def column_values(h) -> np.ndarray:
    """The weights of the columns after ``T``."""
    return np.asarray(h.getSolution().col_value)[1:]
