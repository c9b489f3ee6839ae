"""The IR as JSON: exact round trips, and a clear error for anything else."""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.errors import MscclError
from msccl_py.toolchain import algorithm_from_json, algorithm_to_json


@pytest.mark.parametrize("name,n,params", [("allreduce_ring", 8, {"channels": 2}),
                                            ("broadcast_binomial_tree", 5, {"root": 3}),
                                            ("alltoall_three_step", 8, {"gpus_per_node": 4})])
def test_round_trip_is_exact(name, n, params):
    alg = library.compile(name, n, use_cache=False, **params)
    back = algorithm_from_json(algorithm_to_json(alg))
    assert back == alg and back.root == alg.root and back.max_bytes == alg.max_bytes


@pytest.mark.parametrize("text", ["<algo/>", "{}", '{"format": 99}', '{"format": 1}',
                                  '{"format": 1, "name": "a", "gpus": [[0]]}'])
def test_other_text_is_refused(text):
    with pytest.raises(MscclError):
        algorithm_from_json(text)
