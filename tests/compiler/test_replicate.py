"""Instances replicated after lowering, and the steps made field by field."""

from __future__ import annotations

import dataclasses

import pytest

from allreduce_ring import allreduce_ring
from msccl_py import ir
from msccl_py.compiler import replicate


def test_step_fields_are_ir_steps_fields():
    """The lowering sets exactly these fields on each step it makes without ``__init__``."""
    assert replicate.STEP_FIELDS == tuple(f.name for f in dataclasses.fields(ir.Step))


@pytest.mark.parametrize("instances", [1, 3])
def test_every_field_of_every_step_is_set(instances):
    alg = allreduce_ring(4, channels=2, instances=instances).lower()
    steps = [s for _, tb in alg.threadblocks() for s in tb.steps]
    assert steps
    for s in steps:  # comparing reads every field: an unset one would raise
        assert s == ir.Step(s.op, s.src, s.dst, s.count, list(s.depends), s.has_dependents)
        assert type(s.depends) is list
    assert len({id(s.depends) for s in steps}) == len(steps)  # never shared: callers append
