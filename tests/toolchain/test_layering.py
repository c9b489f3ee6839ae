"""The toolchain sits below the DSL and the library: it imports neither, not even lazily."""

from __future__ import annotations

import ast
from pathlib import Path

import msccl_py.toolchain

ABOVE = ("msccl_py.language", "msccl_py.library", "msccl_py.cli", "msccl_py.tuning",
         "msccl_py.synthesis")


def test_no_import_reaches_up():
    found = []
    for path in Path(msccl_py.toolchain.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "msccl_py":
                names = [f"msccl_py.{a.name}" for a in node.names]   # its submodules
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.name}:{node.lineno} {n}" for n in names
                      if n == "msccl_py" or n.startswith(ABOVE)]
    assert found == []
