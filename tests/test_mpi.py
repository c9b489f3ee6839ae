"""msccl_py.mpi: the seed library's calls give the seed's results, and fail cleanly.

Every scenario of the seed's own tests (plus uneven lengths) runs for lists,
float32 and int64 arrays at world sizes 2, 3, 4 and 8, checked against
expectations computed here with plain NumPy, and, when ``../shared`` is
present, against the seed's own pipe implementation loaded from
``../shared/seeds``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pickle
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from msccl_py import mpi
from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.process_group import RankError

SEED = Path(__file__).resolve().parents[1].parent / "shared" / "seeds" / \
    "nccl_in_500_locs_mpi.txt"
WORLD_SIZES = (2, 3, 4, 8)
KINDS = ("list", "float32", "int64")


# ----- the scenarios: the seed's test functions' data and calls, for any library ----------
def _data(kind: str, values: list):
    return values if kind == "list" else np.array(values, dtype=kind)


def _inputs(name: str, kind: str, rank: int, n: int):
    """The input of ``rank`` in scenario ``name`` (None where the seed's tests pass None)."""
    if name in ("gather", "all_gather"):
        return _data(kind, [rank * 10 + i for i in range(4)])
    if name == "gather_uneven":
        return _data(kind, [rank * 10 + i for i in range(rank + 1)])
    if name == "scatter":
        return _data(kind, [10 * x for x in range(n)]) if rank == 0 else None
    if name == "broadcast":
        return _data(kind, [10 * x for x in range(n)]) if rank == 1 else None
    if name in ("all_reduce_uneven", "reduce_scatter_uneven"):
        return _data(kind, [rank * 10 + x for x in range(2 * n + 1)])
    return _data(kind, [rank * 10 + x for x in range(2 * n)])


CALLS = {
    "gather": lambda lib, x: lib.gather(x),
    "gather_uneven": lambda lib, x: lib.gather(x, target_rank=1),
    "scatter": lambda lib, x: lib.scatter(x, source_rank=0),
    "all_to_all": lambda lib, x: lib.all_to_all(x),
    "all_gather": lambda lib, x: lib.all_gather(x),
    "reduce_scatter": lambda lib, x: lib.reduce_scatter(x, op="sum", slice=True),
    "reduce_scatter_uneven": lambda lib, x: lib.reduce_scatter(x, op="max", slice=True),
    "all_reduce_mean": lambda lib, x: lib.all_reduce(x, op="mean"),
    "all_reduce_max": lambda lib, x: lib.all_reduce(x, op="max"),
    "all_reduce_uneven": lambda lib, x: lib.all_reduce(x, op="sum"),
    "reduce": lambda lib, x: lib.reduce(x, target_rank=0, op="sum"),
    "reduce_mean": lambda lib, x: lib.reduce(x, target_rank=1, op="mean"),
    # last: the seed's broadcast at a world size that is not a power of two leaves an
    # unread message in a pipe, which would corrupt a later call in the same frame
    "broadcast": lambda lib, x: lib.broadcast(x, source_rank=1),
}


def _run_scenarios(lib, rank: int, n: int) -> dict:
    lib.barrier()
    return {(name, kind): call(lib, _inputs(name, kind, rank, n))
            for name, call in CALLS.items() for kind in KINDS}


def _ours(rank, world_size, shared_mem, pipe_pairs):
    mpi.init_env(rank, world_size, shared_mem, pipe_pairs)
    results = _run_scenarios(mpi, rank, world_size)
    results["fallbacks"] = dict(mpi.communicator().fallbacks)
    return results


def _seeds(seed, outdir, rank, world_size, shared_mem, pipe_pairs):
    seed.init_env(rank, world_size, shared_mem, pipe_pairs)
    got = _run_scenarios(seed, rank, world_size)
    (Path(outdir) / f"{rank}.pkl").write_bytes(pickle.dumps(got))


# ----- plain NumPy expectations ---------------------------------------------------------------
def _expected(name: str, kind: str, rank: int, n: int):
    xs = [np.asarray(_inputs(name, kind, r, n)) for r in range(n)]
    stack = np.stack(xs) if name not in ("gather_uneven", "scatter", "broadcast") else None
    if name in ("gather", "gather_uneven"):
        root = 1 if name == "gather_uneven" else 0
        want = np.concatenate(xs) if rank == root else None
    elif name == "scatter":
        want = xs[0][rank::n]
    elif name == "broadcast":
        want = xs[1]
    elif name == "all_to_all":
        want = np.concatenate([x[2 * rank:2 * rank + 2] for x in xs])
    elif name == "all_gather":
        want = np.concatenate(xs)
    elif name in ("reduce_scatter", "reduce_scatter_uneven"):
        total = stack.sum(0) if name == "reduce_scatter" else stack.max(0)
        per = -(-len(total) // n)
        want = total[rank * per:(rank + 1) * per]
    elif name == "all_reduce_mean":
        want = stack.sum(0) / n
    elif name == "all_reduce_max":
        want = stack.max(0)
    elif name == "all_reduce_uneven":
        want = stack.sum(0)
    elif name == "reduce":
        want = stack.sum(0) if rank == 0 else None
    else:   # reduce_mean
        want = stack.sum(0) / n if rank == 1 else None
    if want is None or kind != "list":
        return want
    return want.tolist()


def _assert_same(got, want, where: str) -> None:
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, \
            f"{where}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif isinstance(want, list):
        assert [type(v) for v in got] == [type(v) for v in want], f"{where}: {got} != {want}"
        assert got == want, f"{where}: {got} != {want}"
    else:
        assert got is None and want is None, where


def _scenario_results(results: dict) -> list:
    return [(key, got) for key, got in results.items() if key != "fallbacks"]


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MSCCL_PY_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def ours(cache_env) -> dict:
    """Every scenario's results per rank from msccl_py.mpi, per world size."""
    return {n: mpi.mpi_frame(_ours, world_size=n) for n in WORLD_SIZES}


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_every_scenario_matches_numpy(ours, n):
    for r, results in enumerate(ours[n]):
        # every call ran a library program, none fell back to a built-in one
        assert results["fallbacks"] == {}
        for (name, kind), got in _scenario_results(results):
            _assert_same(got, _expected(name, kind, r, n), f"{name}/{kind}, rank {r} of {n}")


@pytest.mark.slow
def test_sixteen_ranks(cache_env):
    n = 16
    for r, results in enumerate(mpi.mpi_frame(_ours, world_size=n)):
        for (name, kind), got in _scenario_results(results):
            _assert_same(got, _expected(name, kind, r, n), f"{name}/{kind}, rank {r} of {n}")


@pytest.fixture(scope="module")
def seed_module(tmp_path_factory):
    if not SEED.is_file():
        pytest.skip("../shared/seeds is not present")
    text = SEED.read_text()
    code = text[text.index("#!/usr/bin/env python3"):]
    code = code[:code.index('if __name__ == "__main__":')]
    path = tmp_path_factory.mktemp("seed") / "seed_mpi.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("seed_mpi", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_every_scenario_matches_the_seeds_pipes(ours, seed_module, tmp_path, n):
    seed_module.mpi_frame(functools.partial(_seeds, seed_module, str(tmp_path)), world_size=n)
    for r in range(n):
        path = tmp_path / f"{r}.pkl"
        assert path.is_file(), f"the seed's rank {r} did not finish"
        theirs = pickle.loads(path.read_bytes())
        assert theirs.keys() == ours[n][r].keys() - {"fallbacks"}
        for key, want in theirs.items():
            _assert_same(ours[n][r][key], want, f"{key[0]}/{key[1]}, rank {r} of {n}")


# ----- beyond the seed: other data, sizes where its pipes deadlock --------------------------
def _objects(rank, world_size, shared_mem, pipe_pairs):
    mpi.init_env(rank, world_size, shared_mem, pipe_pairs)
    n = world_size
    big = np.arange(1 << 18, dtype=np.float32) + rank      # 1 MiB: the seed's sends block
    mine = ("r", rank, {"k": [rank] * rank})
    with shared_mem.get_lock():             # the seed's shared_mem: one int for all ranks
        shared_mem.value += 1
    mpi.barrier()
    return {
        "all_gather_tuple": mpi.all_gather(mine),
        "gather_2d": mpi.gather(np.full((2, rank + 1), rank, dtype=np.int16), target_rank=0),
        "all_gather_axis0": mpi.all_gather(np.full((1, 3), rank), axis=0),
        "all_to_all_big": mpi.all_to_all(big),
        "reduce_scatter_big": mpi.reduce_scatter(big, op="sum", slice=True),
        "all_reduce_prod": mpi.all_reduce((rank + 1, 2.0), op="PROD"),
        "all_reduce_min": mpi.all_reduce(np.array([[rank, -rank]]), op="min"),
        "slice_false": mpi.reduce_scatter([rank] * n, op="sum"),
        # small calls share staging arrays: an earlier result must not change
        "twice": (mpi.all_reduce(np.ones(4)), mpi.all_reduce(np.full(4, 2.0))),
        "shared_mem": shared_mem.value,
        "env": (os.environ["RANK"], os.environ["WORLD_SIZE"], mpi.get_rank(),
                mpi.get_world_size()),
    }


def test_any_picklable_data_and_large_buffers(cache_env):
    n = 4
    out = mpi.mpi_frame(_objects, world_size=n)
    bigs = [np.arange(1 << 18, dtype=np.float32) + r for r in range(n)]
    k = (1 << 18) // n
    for r, got in enumerate(out):
        assert got["all_gather_tuple"] == tuple(x for q in range(n)
                                                for x in ("r", q, {"k": [q] * q}))
        assert got["all_gather_axis0"].shape == (n, 3)
        np.testing.assert_array_equal(got["all_gather_axis0"][:, 0], np.arange(n))
        np.testing.assert_array_equal(got["all_to_all_big"],
                                      np.concatenate([b[r * k:(r + 1) * k] for b in bigs]))
        np.testing.assert_array_equal(got["reduce_scatter_big"],
                                      sum(bigs)[r * k:(r + 1) * k])
        assert got["all_reduce_prod"] == (24, 16.0)
        assert type(got["all_reduce_prod"][0]) is float    # a float element: float64
        np.testing.assert_array_equal(got["all_reduce_min"], [[0, -(n - 1)]])
        assert got["slice_false"] == [n * (n - 1) // 2] * n
        assert got["twice"][0].tolist() == [n] * 4 and got["twice"][1].tolist() == [2 * n] * 4
        assert got["shared_mem"] == n
        assert got["env"] == (str(r), str(n), r, n)
    g = out[0]["gather_2d"]
    assert g.dtype == np.int16 and g.shape == (2, sum(range(1, n + 1)))
    assert out[1]["gather_2d"] is None


# ----- failures ---------------------------------------------------------------------------
def _children() -> set[int]:
    me = str(os.getpid())
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == me:
                    kids.add(int(entry.name))
            except OSError:
                pass
    return kids


@pytest.fixture
def no_leaks(cache_env):
    before_shm, before = set(os.listdir("/dev/shm")), _children()
    yield
    deadline = time.monotonic() + 5
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children() - before == set(), "rank processes were left behind"
    assert set(os.listdir("/dev/shm")) - before_shm == set(), "shared memory was left behind"


def _raises_in_rank_2(rank, world_size, shared_mem, pipe_pairs):
    mpi.init_env(rank, world_size, shared_mem, pipe_pairs)
    data = [rank] * 8
    if rank == 2:
        raise ValueError("bad data on rank 2")
    return mpi.all_reduce(data, op="mean")


def test_exception_in_one_rank_ends_every_rank_with_its_traceback(no_leaks):
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        mpi.mpi_frame(_raises_in_rank_2, world_size=4, timeout=30)
    assert time.monotonic() - t0 < 20, "the other ranks hung instead of stopping"
    err = info.value
    assert err.rank == 2 and err.remote_type == "ValueError"
    assert "rank 2 raised ValueError: bad data on rank 2" in str(err)
    assert "Traceback in rank 2" in str(err) and "_raises_in_rank_2" in err.remote_traceback


def _mismatch(rank, world_size, shared_mem, pipe_pairs):
    if rank == 0:
        return mpi.all_reduce(np.ones(4))
    return mpi.reduce(np.ones(4))


def _killed(rank, world_size, shared_mem, pipe_pairs):
    mpi.barrier()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return mpi.all_gather([rank])


def _bad_scatter(rank, world_size, shared_mem, pipe_pairs):
    return mpi.scatter(list(range(5)) if rank == 0 else None)


def _uses_pipes(rank, world_size, shared_mem, pipe_pairs):
    pipe_pairs[(rank, (rank + 1) % world_size)].send(rank)


def _wrong_env(rank, world_size, shared_mem, pipe_pairs):
    mpi.init_env(0, world_size, shared_mem, pipe_pairs)


def _bad_op(rank, world_size, shared_mem, pipe_pairs):
    return mpi.all_reduce([1, 2], op="median")


def _strings(rank, world_size, shared_mem, pipe_pairs):
    return mpi.all_reduce(["a", "b"])


def _fails_to_load():
    raise ValueError("not here")


class _LoadsNowhere:
    def __reduce__(self):
        return _fails_to_load, ()


def _unloadable(rank, world_size, shared_mem, pipe_pairs):
    return mpi.broadcast(_LoadsNowhere() if rank == 0 else None)


def _unpicklable(rank, world_size, shared_mem, pipe_pairs):
    return mpi.all_gather(lambda: rank)


@pytest.mark.parametrize("fn,error,pattern", [
    (_mismatch, MscclRuntimeError, r"mismatched collective calls at call #1: rank \d called "
                                   r"(all)?reduce\(count=4.* but rank \d called (all)?reduce"),
    (_killed, MscclRuntimeError, r"rank 1 died \(killed by signal SIGKILL\)"),
    (_bad_scatter, RankError, r"rank 0 raised SizeError: rank 0: scatter: len\(data\) = 5 "
                              r"does not split into 3 equal strided shares"),
    (_uses_pipes, RankError, r"pipe_pairs\[\(\d, \d\)\]: msccl_py.mpi has no point-to-point"),
    (_wrong_env, RankError, r"init_env\(rank=0, world_size=3\) in the process of rank [12]"),
    (_bad_op, RankError, r"all_reduce: unknown op 'median'; use one of sum, max, min, prod, "
                         r"mean"),
    (_unloadable, RankError, r"rank [12]: broadcast: the data from rank 0 cannot be unpickled "
                             r"here: ValueError: not here"),
    (_unpicklable, RankError, r"rank \d: all_gather: the data cannot be pickled"),
    (_strings, RankError, r"all_reduce: a list to reduce must hold ints or floats \(int64 "
                          r"range\), got elements of type str"),
])
def test_failures_end_every_rank_with_a_clear_error(no_leaks, fn, error, pattern):
    with pytest.raises(error, match=pattern):
        mpi.mpi_frame(fn, world_size=3, timeout=30)


def test_outside_mpi_frame(monkeypatch):
    with pytest.raises(MscclRuntimeError, match=r"all_reduce: msccl_py.mpi collectives run "
                                                r"only inside mpi_frame"):
        mpi.all_reduce([1.0])
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(MscclRuntimeError, match=r"get_rank: not inside mpi_frame and \$RANK"):
        mpi.get_rank()
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "5")
    assert (mpi.get_rank(), mpi.get_world_size()) == (3, 5)
