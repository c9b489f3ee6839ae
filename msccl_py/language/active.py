"""The programs being written: the innermost ``with MSCCLProgram(...)`` block is the current one.

>>> stack
[]
"""

from __future__ import annotations

from msccl_py.errors import ProgramError
from msccl_py.language.call_site import caller

#: the open ``with MSCCLProgram(...)`` blocks, innermost last
stack: list = []


def current():
    """The innermost program being written; a ProgramError at the user's line if none is."""
    if not stack:
        file, line = caller()
        raise ProgramError("no MSCCLProgram is active; call this inside `with MSCCLProgram(...)`",
                           file, line)
    return stack[-1]
