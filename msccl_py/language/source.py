"""Find the user's source line behind a DSL call."""

from __future__ import annotations

import os
import sys

from msccl_py.toolchain.capture import PACKAGE_DIR


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


def importer() -> str | None:
    """FILE of the user's code whose ``import`` is running now (import machinery skipped)."""
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith((PACKAGE_DIR, "<frozen"))
                             or "importlib" in f.f_code.co_filename):
        f = f.f_back
    return None if f is None else f.f_code.co_filename


def is_main_script(file: str | None) -> bool:
    """Whether ``file`` is the script this interpreter runs (``python prog.py``).

    A REPL, ``python -c``, a notebook or a test runner calling the DSL is not.
    """
    if not file or not sys.argv or not sys.argv[0]:
        return False
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    path = os.path.abspath(file)
    return main is not None and os.path.abspath(main) == path == os.path.abspath(sys.argv[0])
