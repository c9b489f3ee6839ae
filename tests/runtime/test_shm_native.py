"""The shm runtime's native data path: same results as the Python executor, fallback, poison."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError
from msccl_py.ir import Loc, Step, Threadblock
from msccl_py.runtime import reference, shm, shm_native
from msccl_py.runtime import shm_fallback as F

needs_native = pytest.mark.skipif(shm_native.library() is None,
                                  reason="the native executor cannot be built here")


@pytest.fixture(autouse=True)
def _fresh_pools():
    shm.close()
    yield
    shm.close()


def _cases():
    """(algorithm, inputs, op, buffsize) covering every op kind, dtype and FIFO regime."""
    rng = np.random.default_rng(7)
    out = []
    for dtype in ("float16", "float32", "float64", "int32", "int64", "uint8"):
        for op in ("sum", "prod", "max", "min"):
            xs = [rng.integers(0 if dtype == "uint8" else -3, 4, size=4 * 9).astype(dtype)
                  for _ in range(4)]
            if np.dtype(dtype).kind == "f":
                xs = [x / np.asarray(3, dtype) for x in xs]   # inexact values: rounding shows
                xs[1][5] = np.nan                             # NaN propagation of max/min
            out.append((F.allreduce_ring(4), xs, op, None))
    big = [rng.standard_normal(8 * 3001).astype(np.float32) for _ in range(4)]
    out.append((F.allreduce_ring(4, channels=2), big, "sum", 1 << 13))   # many iterations
    out.append((F.allgather_ring(4), [x[:77] for x in big], "sum", None))
    out.append((F.alltoall_direct(4), [x[:4 * 5] for x in big], "sum", None))
    out.append((F.reduce_scatter_ring(4), [x[:4 * 6] for x in big], "max", 1 << 13))
    # steps of 256 KiB and more write the caller's arrays with non-temporal stores; odd
    # lengths leave chunk boundaries unaligned
    huge = [rng.standard_normal(4 * 160_003).astype(np.float16) for _ in range(4)]
    huge[2][123_457] = np.nan
    out.append((F.allreduce_ring(4), huge, "max", None))
    out.append((F.allreduce_ring(4), [(x * 7).astype(np.int64) for x in huge[:1] * 4], "sum",
                None))
    out.append((F.allgather_ring(4), [x[:90_001].astype(np.float64) for x in huge], "sum",
                None))
    return out


def _run_all(mode: str, monkeypatch) -> list:
    monkeypatch.setenv(shm_native.ENV_MODE, mode)
    got = [shm.run(alg, xs, op, buffsize=b) for alg, xs, op, b in _cases()]
    shm.close()
    return got


@needs_native
def test_native_results_are_bit_identical_to_the_python_executor(monkeypatch):
    native = _run_all("native", monkeypatch)
    python = _run_all("python", monkeypatch)
    for (alg, _, op, _), a, b in zip(_cases(), native, python):
        for r, (x, y) in enumerate(zip(a, b)):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8),
                                          err_msg=f"{alg.name} {op} {x.dtype} rank {r}")


def _pool_is_native() -> bool:
    from msccl_py.comm.local import launch
    return launch(lambda comm: comm._rt.native is not None, 2)[0]


def test_executor_choice_follows_the_environment(monkeypatch):
    monkeypatch.setenv(shm_native.ENV_MODE, "python")
    assert not _pool_is_native()
    if shm_native.library() is not None:
        monkeypatch.setenv(shm_native.ENV_MODE, "auto")
        assert _pool_is_native()
    monkeypatch.setenv(shm_native.ENV_MODE, "fast")
    with pytest.raises(MscclRuntimeError, match="MSCCL_PY_SHM_EXECUTOR='fast'"):
        shm_native.mode()


_NO_COMPILER = textwrap.dedent("""
    import numpy as np
    from msccl_py.runtime import shm, shm_fallback
    outs = shm.run(shm_fallback.allreduce_ring(2), [np.ones(4), np.ones(4)])
    print(outs[0].tolist())
""")


def test_without_a_compiler_the_python_executor_runs_with_one_note(tmp_path):
    env = dict(os.environ, CXX="no-such-compiler-msccl", MSCCL_PY_CACHE=str(tmp_path),
               MSCCL_PY_SHM_EXECUTOR="auto")
    proc = subprocess.run([sys.executable, "-c", _NO_COMPILER], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[2.0, 2.0, 2.0, 2.0]"
    notes = [line for line in proc.stderr.splitlines() if line.startswith("msccl_py:")]
    assert notes == ["msccl_py: the shm runtime uses its Python executor: no C++ compiler "
                     "(g++, or $CXX) was found"]
    assert not list(tmp_path.rglob("*.so"))
    env["MSCCL_PY_SHM_EXECUTOR"] = "native"
    proc = subprocess.run([sys.executable, "-c", _NO_COMPILER], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "MSCCL_PY_SHM_EXECUTOR=native but no C++ compiler" in proc.stderr


@needs_native
def test_build_goes_to_the_cache_directory(tmp_path, monkeypatch):
    built = shm_native.build()          # this session's build: found, not rebuilt
    assert built.parent == Path(os.environ["MSCCL_PY_CACHE"]) / "native"
    assert built.name.startswith("msccl_shm_") and built.suffix == ".so"
    monkeypatch.setenv("MSCCL_PY_CACHE", str(tmp_path))
    assert shm_native.cache_dir() == tmp_path / "native"


def test_each_cpu_model_gets_its_own_build(monkeypatch):
    # a cache shared by machines (a network home) must not hand one CPU a build
    # that uses another's instructions
    from msccl_py.transport import cxx_build
    here = shm_native._key("g++")
    monkeypatch.setattr(cxx_build, "host_cpu", lambda: "model name : another CPU\nflags : sse2\n")
    assert shm_native._key("g++") != here


def test_unwritten_output_is_poisoned_like_the_reference():
    # rank 1 receives chunk 0 only; its output chunk 1 is never written
    send = Threadblock(0, 1, -1, 0, [Step("send", Loc("i", 0), Loc("o", 0))])
    recv = Threadblock(0, -1, 0, 0, [Step("recv", Loc("i", 0), Loc("o", 0))])
    alg = ir.Algorithm("half", "custom", "Simple", False, 2, 2, 1,
                       [ir.Gpu(0, 2, 2, 0, [send]), ir.Gpu(1, 2, 2, 0, [recv])])
    for dtype in ("float32", "int32"):
        xs = [np.arange(6, dtype=dtype) + 10 * r for r in range(2)]
        got = shm.run(alg, xs)
        want = reference.run(alg, xs)
        np.testing.assert_array_equal(got[1], want[1])
        assert got[1][:3].tolist() == xs[0][:3].tolist()
        assert np.isnan(got[1][3]) if dtype == "float32" else \
            got[1][3] == reference.poison(np.dtype(dtype))


def _repeats(comm):
    x = np.zeros(1000, dtype=np.float32)
    y = np.empty_like(x)
    got = []
    for k in range(5):
        x[:] = k * (comm.rank + 1)           # same arrays, new contents each call
        got.append(float(comm.all_reduce(x, out=y)[7]))
        got.append(float(comm.all_reduce(x, op="max", out=y)[3]))
    z = np.ones(1000, dtype=np.float32)      # another array: not the repeated call
    got.append(float(comm.all_reduce(z, out=y)[0]))
    return got


def test_repeated_calls_on_the_same_arrays_see_their_new_contents():
    from msccl_py.comm.local import launch
    res = launch(_repeats, 3)
    want = []
    for k in range(5):
        want += [6.0 * k, 3.0 * k]
    want.append(3.0)
    assert res == [want] * 3
