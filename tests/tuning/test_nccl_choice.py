"""NCCL's own algorithm and protocol choice per size, from its tuning model's figures."""

from __future__ import annotations

from msccl_py.topologies import load
from msccl_py.tuning.nccl import nccl_choice, nccl_times


def test_protocol_moves_from_ll_to_ll128_to_simple_over_nvlink():
    topo = load("dgx-a100")
    picks = [nccl_choice("allreduce", 1 << k, topo)[1] for k in range(10, 31)]
    assert picks[0] == "LL" and picks[-1] == "Simple" and "LL128" in picks
    # once a protocol is left behind it does not come back as sizes grow
    order = [p for i, p in enumerate(picks) if i == 0 or picks[i - 1] != p]
    assert order == ["LL", "LL128", "Simple"]


def test_ll128_is_nvlink_only_and_tree_is_allreduce_only():
    assert ("Ring", "LL128") not in nccl_times("allreduce", 1 << 20, load("mi300x"))
    assert {a for a, _ in nccl_times("allgather", 1 << 20, load("dgx-a100"))} == {"Ring"}


def test_tree_wins_small_messages_across_nodes():
    topo = load("ndv5", nodes=4)
    assert nccl_choice("allreduce", 1 << 10, topo) == ("Tree", "LL")
    assert nccl_choice("allreduce", 1 << 30, topo)[1] == "Simple"
