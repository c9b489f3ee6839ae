"""Find the user's source line behind a DSL call."""

from __future__ import annotations

import os
import sys
from sys import _getframe

from msccl_py.toolchain.capture import PACKAGE_DIR


# caller()'s memo: the last user frame's code object (held, so `is` cannot mistake another
# for it), its file, and the line of each instruction offset asked about (reading
# ``f_lineno`` scans the code's line table: long for a script's module code). One tuple,
# replaced whole, so that no thread sees the parts of two memos.
_memo: tuple = (None, None, {})


def caller() -> tuple[str | None, int | None]:
    """``(file, line)`` of the innermost frame outside the msccl_py package.

    Called by the package's own functions (it runs once per DSL operation), so
    the search starts at the frame that called them.
    """
    global _memo
    try:
        f = _getframe(2)
    except ValueError:  # asked from a bottom frame
        return None, None
    memo = _memo
    code = f.f_code
    if code is not memo[0]:
        file = code.co_filename
        if file.startswith(PACKAGE_DIR):  # called through the package's own code: walk out
            while f is not None and f.f_code.co_filename.startswith(PACKAGE_DIR):
                f = f.f_back
            if f is None:
                return None, None
            return f.f_code.co_filename, f.f_lineno
        memo = _memo = (code, file, {})
    lines = memo[2]
    at = f.f_lasti
    line = lines.get(at)
    if line is None:
        line = lines[at] = f.f_lineno
    return memo[1], line


def is_main_script(file: str | None) -> bool:
    """Whether ``file`` is the script this interpreter runs (``python prog.py``).

    A REPL, ``python -c``, a notebook or a test runner calling the DSL is not.
    """
    if not file or not sys.argv or not sys.argv[0]:
        return False
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    path = os.path.abspath(file)
    return main is not None and os.path.abspath(main) == path == os.path.abspath(sys.argv[0])
