"""Cluster programs stay about linear in ranks, and take the few steps their patterns promise.

Sizes are counted, not timed: steps of the lowered program at n and 2n ranks
(32 and 64 ranks: 4 and 8 nodes of 8 GPUs, or 32 and 64 nodes of one), where a
ring-based program's steps grow about fourfold.
"""

from __future__ import annotations

import math

import pytest

from msccl_py import library
from msccl_py.analysis import critical_path
from msccl_py.library import scaled

#: (program, parameters at n ranks) of the programs meant for clusters
def _linear(n: int) -> float:
    return n


def _n_log_n(n: int) -> float:
    return n * math.log2(n)


#: (program, ranks to start from, its growth, parameters at n ranks) of the programs meant
#: for clusters: a tree has O(1) steps per rank, PAT-style steps O(log n)
CLUSTER = [
    ("allreduce_hierarchical", 32, _linear, lambda n: {"gpus_per_node": 8}),
    # below G+1 nodes some GPUs of a node have no window: from 16 nodes on every one has
    ("allgather_hierarchical", 128, _n_log_n, lambda n: {"gpus_per_node": 8}),
    ("reduce_scatter_hierarchical", 128, _n_log_n, lambda n: {"gpus_per_node": 8}),
    ("nccl_tree", 32, _linear, lambda n: {"topology": "dgx-h100", "nodes": n // 8}),
    ("allgather_pat", 32, _n_log_n, lambda n: {}),
    ("reduce_scatter_pat", 32, _n_log_n, lambda n: {}),
]


def _steps(name: str, n: int, params: dict) -> int:
    alg = library.compile(name, n, use_cache=False, **params)
    return sum(len(tb.steps) for _, tb in alg.threadblocks())


@pytest.mark.parametrize("name,n,growth,params", CLUSTER, ids=[c[0] for c in CLUSTER])
def test_steps_grow_about_linearly(name, n, growth, params):
    """Doubling the ranks multiplies the steps by what the growth says, within 10%: 2 for
    linear, 2.4 for n log n from 32 ranks (a ring's would be about 4)."""
    small, large = (_steps(name, ranks, params(ranks)) for ranks in (n, 2 * n))
    assert large / small < 1.1 * growth(2 * n) / growth(n), (small, large)


def test_the_ring_options_are_quadratic():
    """What the defaults replace: the same programs with rings across nodes."""
    for name in ("allreduce_hierarchical", "allgather_hierarchical"):
        small, large = (_steps(name, n, {"gpus_per_node": 2, "inter": "ring"})
                        for n in (16, 32))
        assert large / small > 3, (name, small, large)


@pytest.mark.parametrize("n,local", [(16, 8), (32, 8), (24, 2)])
def test_hierarchical_critical_paths_are_logarithmic(n, local):
    nodes = n // local
    hops = max(len(scaled._window_hops(first, length))
               for first, length in scaled.windows(nodes, local))
    for name in ("allgather_hierarchical", "reduce_scatter_hierarchical"):
        alg = library.compile(name, n, gpus_per_node=local, use_cache=False)
        assert critical_path(alg).length <= 2 + hops
    alg = library.compile("allreduce_hierarchical", n, gpus_per_node=local, use_cache=False)
    assert critical_path(alg).length <= 2 + 2 * math.ceil(math.log2(nodes))


@pytest.mark.parametrize("n", [3, 8, 13, 32])
def test_pat_critical_paths_are_logarithmic(n):
    for name in ("allgather_pat", "reduce_scatter_pat"):
        assert critical_path(library.compile(name, n, use_cache=False)).length <= math.ceil(
            math.log2(n))
