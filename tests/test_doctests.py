"""The docstring examples of the DSL, compiler, IR and errors run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["msccl_py.errors", "msccl_py.ir", "msccl_py.collectives", "msccl_py.language", "msccl_py.language.chunk",
           "msccl_py.language.collectives", "msccl_py.language.program",
           "msccl_py.language.chunkref", "msccl_py.language.emit", "msccl_py.language.active",
           "msccl_py.progress", "msccl_py.cli.sweep",
           "msccl_py.language.routines", "msccl_py.language.runner", "msccl_py.compiler.lower",
           "msccl_py.toolchain", "msccl_py.toolchain.artifact", "msccl_py.toolchain.capture",
           "msccl_py.toolchain.judge", "msccl_py.toolchain.persist",
           "msccl_py.toolchain.pipeline", "msccl_py.toolchain.sources",
           "msccl_py.library.build", "msccl_py.runtime.memory"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
