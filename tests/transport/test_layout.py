"""A launch's layout (hosts x ranks per host) and who shares memory."""

from __future__ import annotations

import pytest

from msccl_py.errors import MscclError
from msccl_py.transport.layout import LaunchLayout, parse_shape
from msccl_py.transport.shm_host import host_identity


def test_regular_layout():
    lay = LaunchLayout.of(["n0"] * 8 + ["n1"] * 8)
    assert lay.hosts == ("n0", "n1") and lay.ranks_per_host == 8 and lay.gpus_per_node == 8
    assert lay.shape == "2x8"
    assert lay.describe() == "2 hosts x 8 ranks (n0: ranks 0-7, n1: ranks 8-15)"
    assert parse_shape(lay.shape) == (2, 8)


def test_one_host_has_no_hierarchy():
    lay = LaunchLayout.of(["a"] * 4)
    assert lay.gpus_per_node is None and lay.shape == "1x4"
    assert lay.describe() == "1 host x 4 ranks (a: ranks 0-3)"


def test_interleaved_and_uneven_layouts_get_no_hierarchy():
    mixed = LaunchLayout.of(["a", "b", "a", "b"])
    assert mixed.ranks_per_host == 2 and mixed.gpus_per_node is None and mixed.shape is None
    assert mixed.describe() == "2 hosts x 2 ranks (a: ranks 0,2, b: ranks 1,3)"
    uneven = LaunchLayout.of(["a", "a", "a", "b"])
    assert uneven.ranks_per_host is None and uneven.shape is None
    assert uneven.describe() == "2 hosts of 3, 1 ranks (a: ranks 0-2, b: rank 3)"


@pytest.mark.parametrize("text", ["2", "0x8", "2x", "axb", "2x8x1"])
def test_bad_shapes(text):
    with pytest.raises(MscclError, match="a layout is HOSTSxRANKS"):
        parse_shape(text)


def test_host_identity():
    assert host_identity({"MSCCL_PY_HOST": " node7 "}) == "node7"
    mine = host_identity({})
    assert mine and mine == host_identity({"MSCCL_PY_HOST": ""})   # the machine's: stable
