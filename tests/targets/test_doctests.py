"""The docstring examples of the target packages run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["msccl_py.targets.msccl", "msccl_py.targets.msccl.read", "msccl_py.targets.msccl.names",
           "msccl_py.targets.msccl.write", "msccl_py.targets.msccl.dialects"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
