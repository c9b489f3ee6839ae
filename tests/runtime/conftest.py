"""Fixtures of the runtime tests: shm arenas made in the test process."""

from __future__ import annotations

import pytest

from msccl_py.transport import shm_arena as A


@pytest.fixture
def make_arena():
    """``make_arena(world_size, buffsize)``: a new arena, closed when the test ends."""
    made = []

    def make(world_size: int, buffsize: int) -> A.Arena:
        arena = A.Arena.create(A.Layout(world_size=world_size, buffsize=buffsize))
        made.append(arena)
        return arena

    yield make
    for arena in made:
        arena.close()
