"""The joined communicator's program choice knows the launch's layout."""

from __future__ import annotations

import pytest

from msccl_py.comm.selector import Selector
from msccl_py.transport.layout import LaunchLayout

TWO_BY_TWO = LaunchLayout.of(["h0", "h0", "h1", "h1"])


@pytest.fixture(autouse=True)
def _no_algo_dir(monkeypatch):
    monkeypatch.delenv("MSCCL_PY_ALGO_DIR", raising=False)


@pytest.mark.parametrize("collective, nbytes, name", [
    ("allreduce", 4 << 20, "allreduce_hierarchical"),
    ("allgather", 4 << 20, "allgather_hierarchical"),
    ("alltoall", 4 << 10, "alltoall_two_step"),
])
def test_several_hosts_get_hierarchical_programs(collective, nbytes, name):
    pick = Selector(4, TWO_BY_TWO)(collective, nbytes)
    assert pick.name == name and pick.params["gpus_per_node"] == 2
    assert "in nodes of 2" in pick.why
    flat = Selector(4, None)(collective, nbytes)
    assert flat.name != name and "gpus_per_node" not in flat.params


def test_small_calls_and_odd_layouts_stay_flat():
    assert Selector(4, TWO_BY_TWO)("allreduce", 4 << 10).name == "allreduce_oneshot"
    mixed = LaunchLayout.of(["a", "b", "a", "b"])       # ranks of a host not consecutive
    assert Selector(4, mixed).gpus_per_node is None
    assert Selector(4, mixed)("allreduce", 4 << 20).name != "allreduce_hierarchical"
