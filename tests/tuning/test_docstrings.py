"""The docstring examples of the tuning package run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["msccl_py.tuning.logs", "msccl_py.tuning.nccl",
                                  "msccl_py.tuning.calibrate", "msccl_py.tuning.tune",
                                  "msccl_py.tuning.selection", "msccl_py.tuning.ranges",
                                  "msccl_py.tuning.nccl_model", "msccl_py.tuning.nccl_sim",
                                  "msccl_py.tuning.nccl_tuner"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
