"""The docstring examples of the plan layer run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["msccl_py.plan.connections", "msccl_py.plan.contract", "msccl_py.plan.events",
           "msccl_py.plan.findings", "msccl_py.plan.geometry", "msccl_py.plan.reductions",
           "msccl_py.plan.sizes", "msccl_py.plan.static", "msccl_py.plan.tables"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
