"""Find the user's source line behind a DSL call."""

from __future__ import annotations

import os
import sys

#: frames whose file starts with this are the package's own, not the user's
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def caller() -> tuple[str | None, int | None]:
    """``(file, line)`` of the innermost frame outside the msccl_py package.

    Called by the package's own functions (it runs once per DSL operation), so
    the search starts at the frame that called them.
    """
    try:
        f = sys._getframe(2)
    except ValueError:  # asked from a bottom frame
        return None, None
    while f is not None and f.f_code.co_filename.startswith(PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return None, None
    return f.f_code.co_filename, f.f_lineno
