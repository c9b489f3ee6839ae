"""Declarations for program files that do not carry their own ``SPEC``.

Keyed by file stem. Used for programs written before the registry existed;
a file's own ``SPEC``/``SPECS`` always wins.
"""

from __future__ import annotations

from msccl_py.library.spec import ProgramSpec

KNOWN_SPECS: dict[str, list[ProgramSpec]] = {}
