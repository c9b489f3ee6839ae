"""The communicator over real processes, checked against plain NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import msccl_py
from msccl_py.errors import SizeError
from msccl_py.runtime.process_group import RankError

DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8")
OPS = ("sum", "prod", "max", "min", "avg")
SIZES = (1, 7, 64, 1003)


def _x(rank: int, size: int, dtype="int64", op="sum") -> np.ndarray:
    """Deterministic small integers per rank, exact under every op and dtype."""
    rng = np.random.default_rng(1000 * rank + size)
    if op == "prod":
        lo, hi = (0 if np.dtype(dtype).kind == "u" else -2), 3
    else:
        lo, hi = (0 if np.dtype(dtype).kind == "u" else -20), 20
    return rng.integers(lo, hi, size=size).astype(dtype)


def _fold(xs, op):
    acc = xs[0].copy()
    f = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
         "avg": np.add}[op]
    for x in xs[1:]:
        acc = f(acc, x)
    if op == "avg":
        if acc.dtype.kind == "f":
            return (acc / acc.dtype.type(len(xs))).astype(acc.dtype)
        return np.trunc(acc.astype(np.float64) / len(xs)).astype(acc.dtype)
    return acc


def _every_collective(comm):
    r, n = comm.rank, comm.world_size
    res = []
    for k in SIZES:
        x = _x(r, k)
        xb = _x(r, n * k)
        res.append({
            "all_reduce": comm.all_reduce(x),
            "all_reduce_max": comm.all_reduce(x, op="max"),
            "all_gather": comm.all_gather(x),
            "reduce_scatter": comm.reduce_scatter(xb),
            "all_to_all": comm.all_to_all(xb),
            "broadcast": comm.broadcast(x if r == n - 1 else None, root=n - 1),
            "reduce": comm.reduce(x, root=n // 2, op="min"),
            "gather": comm.gather(x, root=0),
            "scatter": comm.scatter(xb if r == 1 % n else None, root=1 % n),
        })
        comm.barrier()
    return res


@pytest.mark.parametrize("n,programs", [(2, "library"), (3, "library"), (4, "library"),
                                        (4, "builtin")])
def test_every_collective_matches_numpy(n, programs):
    out = msccl_py.launch(_every_collective, n, programs=programs)
    for i, k in enumerate(SIZES):
        xs = [_x(r, k) for r in range(n)]
        xbs = [_x(r, n * k) for r in range(n)]
        total = _fold(xs, "sum")
        for r in range(n):
            got = out[r][i]
            where = f"rank {r} of {n}, size {k}"
            np.testing.assert_array_equal(got["all_reduce"], total, err_msg=where)
            np.testing.assert_array_equal(got["all_reduce_max"], _fold(xs, "max"), err_msg=where)
            np.testing.assert_array_equal(got["all_gather"], np.concatenate(xs), err_msg=where)
            np.testing.assert_array_equal(got["reduce_scatter"],
                                          _fold(xbs, "sum")[r * k:(r + 1) * k], err_msg=where)
            np.testing.assert_array_equal(got["all_to_all"],
                                          np.concatenate([xbs[q][r * k:(r + 1) * k]
                                                          for q in range(n)]), err_msg=where)
            np.testing.assert_array_equal(got["broadcast"], xs[n - 1], err_msg=where)
            np.testing.assert_array_equal(got["scatter"], xbs[1 % n][r * k:(r + 1) * k],
                                          err_msg=where)
            if r == n // 2:
                np.testing.assert_array_equal(got["reduce"], _fold(xs, "min"), err_msg=where)
            else:
                assert got["reduce"] is None
            if r == 0:
                np.testing.assert_array_equal(got["gather"], np.concatenate(xs), err_msg=where)
            else:
                assert got["gather"] is None


def _all_reduce_every_op(comm):
    res = {}
    for dtype in DTYPES:
        for op in OPS:
            res[dtype, op] = comm.all_reduce(_x(comm.rank, 301, dtype, op), op=op)
    res["big"] = comm.all_reduce(np.arange(1 << 20, dtype=np.float32) * (comm.rank + 1))
    return res


def test_all_reduce_every_dtype_and_op_is_exact():
    n = 4
    out = msccl_py.launch(_all_reduce_every_op, n)
    for dtype in DTYPES:
        for op in OPS:
            want = _fold([_x(r, 301, dtype, op) for r in range(n)], op)
            for r in range(n):
                got = out[r][dtype, op]
                assert got.dtype == np.dtype(dtype)
                np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {op} rank {r}")
    want = np.arange(1 << 20, dtype=np.float32) * 10
    for r in range(n):
        np.testing.assert_array_equal(out[r]["big"], want)


def _out_and_shapes(comm):
    x = np.arange(12, dtype=np.float64).reshape(3, 4) + comm.rank
    out = np.empty(12, dtype=np.float64)
    same = comm.all_reduce(x, out=out) is out
    fresh = comm.all_reduce(x)
    ag_out = np.zeros(24)
    comm.all_gather(x.reshape(-1)[:12], out=ag_out)
    try:
        comm.all_reduce(x, out=np.empty(5))
        bad_out = None
    except SizeError as exc:
        bad_out = str(exc)
    try:
        comm.reduce_scatter(np.ones(5))
        indivisible = None
    except SizeError as exc:
        indivisible = str(exc)
    empty = comm.all_reduce(np.zeros(0, dtype=np.int32))
    scalar = comm.all_reduce(np.array(2.5))
    return (same, out, fresh.shape, np.shares_memory(fresh, x), ag_out, bad_out, indivisible,
            comm.rank, comm.world_size, empty, scalar)


def test_out_parameter_new_arrays_and_size_errors():
    res = msccl_py.launch(_out_and_shapes, 2)
    for r, (same, out, shape, shares, ag_out, bad_out, indivisible, rank, size, empty,
            scalar) in enumerate(res):
        assert empty.shape == (0,) and empty.dtype == np.int32
        assert scalar.shape == () and float(scalar) == 5.0
        assert (rank, size) == (r, 2)
        assert same
        np.testing.assert_array_equal(out, np.arange(12) * 2 + 1)
        assert shape == (3, 4) and not shares
        np.testing.assert_array_equal(ag_out, np.concatenate([np.arange(12), np.arange(12) + 1]))
        assert "out= must be a float64 array of 12 elements" in bad_out
        assert "5 elements do not split into 2 equal blocks" in indivisible


def _repeated_without_out(comm):
    # the same input array again and again, as small-message users call: each call
    # returns a new array, with the input's values at the time of the call
    x = np.zeros((2, 8), dtype=np.float32)
    results = []
    for k in range(4):
        x[:] = k + comm.rank
        results.append(comm.all_reduce(x))
    results[0][:] = -1      # the caller owns what it got back
    again = comm.all_reduce(x)
    return results, again


@pytest.mark.parametrize("n", [2, 3])
def test_repeated_calls_without_out_return_new_arrays(n):
    for results, again in msccl_py.launch(_repeated_without_out, n):
        assert len({id(r) for r in results} | {id(again)}) == 5
        for k, r in enumerate(results[1:], start=1):
            assert r.shape == (2, 8)
            np.testing.assert_array_equal(r, np.full((2, 8), n * k + n * (n - 1) // 2))
        assert (results[0] == -1).all()
        np.testing.assert_array_equal(again, np.full((2, 8), n * 3 + n * (n - 1) // 2))


def _eight(comm):
    x = np.full(10, comm.rank, dtype=np.int32)
    return (comm.all_reduce(x), comm.all_gather(x[:2]),
            comm.all_to_all(np.arange(8, dtype=np.int32) + 10 * comm.rank))


def test_eight_ranks_on_two_cores():
    res = msccl_py.launch(_eight, 8)
    for r, (ar, ag, a2a) in enumerate(res):
        np.testing.assert_array_equal(ar, np.full(10, 28))
        np.testing.assert_array_equal(ag, np.repeat(np.arange(8), 2))
        np.testing.assert_array_equal(a2a, np.arange(8) * 10 + r)


def _bad_dtype(comm):
    comm.all_reduce(np.ones(4, dtype=np.complex64))


def test_unsupported_dtype_fails_the_launch_clearly():
    with pytest.raises(RankError, match="dtype complex64 is not supported"):
        msccl_py.launch(_bad_dtype, 2)


def _spawned(comm, scale):
    return comm.all_reduce(np.ones(3) * scale)


def test_spawn_start_method_runs_module_level_functions():
    res = msccl_py.launch(_spawned, 2, args=(2.5,), start_method="spawn")
    np.testing.assert_array_equal(res[1], [5.0, 5.0, 5.0])


def _in_place(comm):
    x = np.arange(6, dtype=np.int64) + comm.rank
    y = comm.all_reduce(x, out=x)
    g = np.arange(2 * comm.world_size, dtype=np.int64) + comm.rank
    z = comm.all_gather(g[:2].copy(), out=g)
    return x, y is x, g, z is g


@pytest.mark.parametrize("programs", ["library", "builtin"])
def test_out_may_be_the_input(programs):
    for x, same, g, same_g in msccl_py.launch(_in_place, 3, programs=programs):
        np.testing.assert_array_equal(x, np.arange(6) * 3 + 3)
        assert same and same_g
        np.testing.assert_array_equal(g, [0, 1, 1, 2, 2, 3])


def _sizes_across_programs(comm):
    res = []
    for nbytes in (4 << 10, 256 << 10, 4 << 20, 16 << 20):
        x = (np.arange(nbytes // 4) % 1000 + comm.rank).astype(np.float32)
        y = np.empty_like(x)
        comm.all_reduce(x, out=y)
        prog = comm.program("allreduce", nbytes)[0]
        twin = comm._twins.get(id(prog), (None, None))[1]
        ok = bool(np.array_equal(y, (np.arange(nbytes // 4) % 1000 * 4 + 6).astype(np.float32)))
        unchanged = bool(np.array_equal(x, (np.arange(nbytes // 4) % 1000 + comm.rank)
                                        .astype(np.float32)))
        res.append((prog.name, prog.inplace_only, twin is not None, ok, unchanged))
    return res


def test_in_place_programs_run_out_of_place_without_touching_the_input():
    for rank_res in msccl_py.launch(_sizes_across_programs, 4):
        for name, inplace_only, twin, ok, unchanged in rank_res:
            assert ok and unchanged, name
            if inplace_only:
                assert twin, f"{name} got no out-of-place twin"
