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
