"""Every library program, and real MSCCL XML files, on the shm runtime across real processes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from msccl_py.errors import MscclError
from msccl_py.runtime import reference, shm
from msccl_py.runtime.expected import expected
from msccl_py.plan.tables import plan_for
from msccl_py.runtime.shm_program import call_chunks
from msccl_py.targets.msccl import read_xml

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
CORPUS = SHARED / "corpus" / "xml"


@pytest.fixture(scope="module", autouse=True)
def _pools():
    yield
    shm.close()


def _inputs(alg, count_chunks: int, seed: int, dtype=np.int64) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    chunks = call_chunks(alg, plan_for(alg))
    return [rng.integers(-50, 50, size=int(chunks[r, 0]) * count_chunks).astype(dtype)
            for r in range(alg.ngpus)]


def _oracle(alg, inputs, op, root):
    """expected() where it knows the collective, else the reference runtime."""
    try:
        return expected(alg, inputs, op, root=root)
    except MscclError:
        pass
    if alg.collective == "gather":
        whole = np.concatenate(inputs)
        return [whole if r == root else None for r in range(alg.ngpus)]
    if alg.collective == "scatter":
        block = inputs[root].size // alg.ngpus
        return [inputs[root][r * block:(r + 1) * block] for r in range(alg.ngpus)]
    return reference.run(alg, inputs, op)


def _library_cases():
    try:
        from msccl_py import library
        specs = library.programs()
    except Exception as exc:  # the library is another engineer's work in progress
        return [pytest.param(None, 0, marks=pytest.mark.skip(reason=f"library: {exc}"))]
    cases = []
    for spec in specs:
        for n in (4, 8):
            cases.append(pytest.param(spec.name, n, id=f"{spec.name}-{n}"))
    return cases


def _compile(name: str, n: int):
    from msccl_py import library
    spec = library.get(name)
    names = {p.name for p in spec.params}
    params = {"gpus_per_node": n // 2} if "gpus_per_node" in names else {}
    if not spec.supports(n, **params):
        pytest.skip(f"{name} does not support {n} ranks")
    try:
        return library.compile(name, num_ranks=n, **params), params
    except MscclError:
        # the on-disk cache stores XML, which cannot express gather/scatter
        return library.build_program(name, n, **params).lower(), params


@pytest.mark.parametrize("name,n", _library_cases())
def test_library_program_runs_correctly(name, n):
    alg, params = _compile(name, n)
    root = int(params.get("root", 0))
    # a few elements per chunk and one size that takes many pipeline iterations
    for per_chunk, buffsize in ((3, None), (1000, 1 << 13)):
        xs = _inputs(alg, per_chunk, seed=n)
        outs = shm.run(alg, xs, buffsize=buffsize)
        if alg.collective == "barrier":
            continue
        want = _oracle(alg, xs, "sum", root)
        checked = 0
        for r, (got, exp) in enumerate(zip(outs, want)):
            if exp is None:
                continue
            # custom collectives leave some output unwritten (the reference poisons it)
            defined = exp != reference.poison(exp.dtype)
            checked += int(defined.sum())
            np.testing.assert_array_equal(got[defined], exp[defined], err_msg=f"{name} rank {r}")
        assert checked, f"{name}: the oracle defines no output on any rank"


CORPUS_FILES = ["ns3-msccl__allreduce_ring_8_1.xml", "ns3-msccl-data__ag_ring_ll_8_2.xml",
                "ns3-msccl__allreduce_ring_2_1.xml", "rccl-unittest__all-reduce-ring-ll128.xml",
                "msccl-scheduler__ndv4__ag-1m.xml", "ns3-msccl__allreduce_hierarchical_8_1.xml"]


@pytest.mark.parametrize("fname", CORPUS_FILES)
def test_corpus_xml_matches_reference(fname):
    path = CORPUS / fname
    if not path.is_file():
        pytest.skip("../shared corpus is not present")
    alg = read_xml(str(path))
    xs = _inputs(alg, 5, seed=7, dtype=np.float32)
    want = reference.run(alg, xs, "sum")
    got = shm.run(alg, xs, "sum")
    for r in range(alg.ngpus):
        np.testing.assert_array_equal(got[r], want[r], err_msg=f"{fname} rank {r}")


def _forced_programs(comm, names):
    """Run each named library program through the communicator (out-of-place twin path)."""
    import zlib

    from msccl_py import library
    from msccl_py.runtime.shm_program import out_of_place, rank_program
    calls = {"allreduce": lambda x: comm.all_reduce(x), "broadcast": lambda x: comm.broadcast(x),
             "reduce": lambda x: comm.reduce(x), "alltoall": lambda x: comm.all_to_all(x)}
    res = []
    for name in names:
        spec = library.get(name)
        alg = library.compile(name, num_ranks=comm.world_size)
        prog = rank_program(alg, comm.rank, comm.world_size)
        count = 4 * 999
        key = zlib.crc32(name.encode())
        comm._shapes.clear()
        comm._chosen[(spec.operation, count * 8, 0, 8, False)] = (prog, key)
        x = np.arange(count, dtype=np.float64) * (comm.rank + 1)
        before = x.copy()
        got = calls[spec.operation](x)
        twin = out_of_place(prog) if prog.inplace_only else None
        used = comm.program(spec.operation, count * 8, itemsize=8)[0] is prog
        res.append((name, spec.operation, got, bool(np.array_equal(x, before)) and used,
                    twin is not None))
    return res


def test_in_place_library_programs_via_their_out_of_place_twins():
    try:
        from msccl_py import library
        specs = [s for s in library.programs()
                 if s.operation in ("allreduce", "broadcast", "reduce", "alltoall")
                 and not s.hierarchical and s.supports(4)]
    except Exception as exc:
        pytest.skip(f"library: {exc}")
    import msccl_py
    n = 4
    out = msccl_py.launch(_forced_programs, n, args=([s.name for s in specs],))
    xs = [np.arange(4 * 999, dtype=np.float64) * (r + 1) for r in range(n)]
    for r in range(n):
        for name, operation, got, untouched, _twin in out[r]:
            assert untouched, f"{name} modified the caller's input on rank {r} (or did not run)"
            if operation == "allreduce":
                np.testing.assert_array_equal(got, sum(xs), err_msg=name)
            elif operation == "broadcast":
                np.testing.assert_array_equal(got, xs[0], err_msg=name)
            elif operation == "reduce" and r == 0:
                np.testing.assert_array_equal(got, sum(xs), err_msg=name)
            elif operation == "alltoall":
                k = xs[0].size // n
                np.testing.assert_array_equal(
                    got, np.concatenate([xs[q][r * k:(r + 1) * k] for q in range(n)]),
                    err_msg=name)
    assert any(t for _, _, _, _, t in out[0]), "no program exercised an out-of-place twin"
