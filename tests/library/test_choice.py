"""Choosing a program per call: coverage of every operation and rank count, and the regimes."""

import pytest

from msccl_py import library
from msccl_py.errors import ProgramError
from msccl_py.library.spec import OPERATIONS
from msccl_py.verify import verify

ROOTED = ("broadcast", "reduce", "gather", "scatter")
SIZES = (0, 4096, 1 << 20, 256 << 20)


@pytest.mark.parametrize("op", OPERATIONS)
def test_every_operation_for_every_world_size(op):
    for n in range(1, 18):
        for nbytes in SIZES:
            root = n - 1 if op in ROOTED else 0
            choice = library.select(op, n, nbytes, root=root)
            spec = library.get(choice.name)
            assert spec.operation == op
            assert spec.supports(n, **choice.params), (op, n, choice)
            assert choice.protocol in spec.protocols
            if op in ROOTED:
                assert choice.params["root"] == root


@pytest.mark.parametrize("op", OPERATIONS)
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_selections_compile_and_verify(op, n):
    for nbytes in (64, 64 << 20):
        choice = library.select(op, n, nbytes, root=n // 2 if op in ROOTED else 0)
        alg = choice.compile()
        assert alg.ngpus == n and alg.protocol == choice.protocol
        target = "msccl" if alg.collective == "custom" else "msccl-executor"
        verdict = verify(alg, target=target, root=choice.params.get("root", 0))
        assert verdict.status == "ok", (choice, verdict)


def test_regimes():
    small, large = library.select("allreduce", 8, 8 << 10), library.select("allreduce", 8, 1 << 30)
    assert (small.name, small.protocol) == ("allreduce_oneshot", "LL")
    assert library.select("allreduce", 8, 16 << 10).name == "allreduce_allpairs"
    assert (large.name, large.protocol) == ("allreduce_ring", "Simple")
    # power-of-two-only programs give way to general ones at other counts
    # one step beats log2 n at small sizes (dgx-h100 model; shm runtime, 4 and 8 ranks)
    assert library.select("allgather", 8, 4096).name == "allgather_allpairs"
    assert library.select("allgather", 8, 1 << 20).name == "allgather_recursive_doubling"
    assert library.select("allgather", 6, 1 << 20).name == "allgather_ring"
    assert library.select("reduce_scatter", 12, 16 << 20).name == "reduce_scatter_ring"
    assert library.select("broadcast", 8, 1 << 30).name == "broadcast_scatter_allgather"
    assert library.select("barrier", 13, 0).name == "barrier_dissemination"


def test_multi_node_topology_picks_hierarchical():
    from msccl_py.topologies.compose import build
    from msccl_py.topologies.topofile import parse_text
    machine = parse_text("machine m { gpus 4 linktype l 25 GB/s link 0 <-> 1 l link 2 <-> 3 l "
                         "nic ib 12.5 GB/s gpus 0-3 }")["m"]
    topo = build(machine, nodes=2)
    choice = library.select("allreduce", 8, 64 << 20, topology=topo)
    assert choice.name == "allreduce_hierarchical"
    assert choice.params == {"gpus_per_node": 4}
    assert library.select("alltoall", 8, 64 << 20, topology=topo).name == "alltoall_two_step"
    # explicit layout without a topology, and the flat choice on one machine
    assert library.select("allgather", 16, 64 << 20, gpus_per_node=8).params == {"gpus_per_node": 8}
    from msccl_py.topologies import fully_connected
    assert library.select("allreduce", 8, 64 << 20, topology=fully_connected(8)).name == \
        "allreduce_ring"
    with pytest.raises(ProgramError, match="has 8 ranks but the call has 4"):
        library.select("allreduce", 4, 0, topology=topo)


@pytest.mark.parametrize("args,message", [
    (("allreduc", 4, 0), "unknown collective 'allreduc'"),
    (("allreduce", 0, 0), "rank count must be a positive integer, got 0"),
    (("allreduce", 4, -1), "nbytes must be a non-negative integer"),
    (("broadcast", 4, 0, None, 4), "root 4 is not a rank of 4"),
])
def test_bad_calls(args, message):
    with pytest.raises(ProgramError, match=message):
        library.select(*args)


def test_unrooted_programs_are_skipped_for_a_nonzero_root():
    with pytest.raises(ProgramError, match="no allreduce program supports 4 ranks with root 2"):
        library.select("allreduce", 4, 0, root=2)


def test_verified_size_range_is_respected(monkeypatch):
    """A program the verifier bounds below the call size gives way to the next one."""
    import importlib
    sel = importlib.import_module("msccl_py.library.choice")
    real = sel.Selection.compile

    def bounded(self, cache_dir=None):
        alg = real(self, cache_dir)
        if self.name in ("allreduce_oneshot", "allreduce_allpairs"):
            alg.max_bytes = 1024 if self.name == "allreduce_allpairs" else 512
        return alg
    monkeypatch.setattr(sel.Selection, "compile", bounded)
    assert library.select("allreduce", 8, 512).name == "allreduce_oneshot"
    assert library.select("allreduce", 8, 1024).name == "allreduce_allpairs"
    assert library.select("allreduce", 8, 4096).name == "allreduce_recursive_halving_doubling"
    # allgather sizes count the output, n times the input
    monkeypatch.setattr(sel, "_safe_at", lambda alg, call_bytes: call_bytes <= 4096 * 5)
    assert library.select("allreduce", 6, 4096).name == "allreduce_oneshot"
    with pytest.raises(ProgramError, match="no allgather program for 6 ranks works at 4096 bytes"):
        library.select("allgather", 6, 4096)


@pytest.mark.slow
@pytest.mark.parametrize("n", [33, 64, 65])
def test_large_world_sizes(n):
    """Past 32 ranks some programs outgrow a runtime's tables; select still has an answer."""
    for op in OPERATIONS:
        for nbytes in (1024, 256 << 20):
            choice = library.select(op, n, nbytes)
            assert choice.compile().ngpus == n
