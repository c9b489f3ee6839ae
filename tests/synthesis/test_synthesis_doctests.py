"""The synthesis modules' docstring examples run as written (they need HiGHS)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["bound", "flowgraph", "arborescence", "hops", "packing", "integral", "rings",
           "schedule", "latency", "alltoall", "lp", "paths", "compose"]
#: examples that synthesize whole schedules (a second or more each)
SLOW = ["candidates", "cluster", "search"]


@pytest.mark.parametrize("name", MODULES + [pytest.param(m, marks=pytest.mark.slow)
                                            for m in SLOW])
def test_docstring_examples(highs, name):
    module = importlib.import_module(f"msccl_py.synthesis.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
