"""The emulated GPU kernel runs the corpus XML files and every library program like the reference.

Both runtimes get the same inputs and pipeline slice; results must be
identical (poison included), and where the reference rejects or deadlocks
the emulation must fail the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_runtime_algos import CORPUS, int_inputs, needs_gxx, same

from msccl_py.errors import MscclDeadlockError, MscclError
from msccl_py.runtime import reference
from msccl_py.runtime.cupy import emulated_run

pytestmark = needs_gxx

def corpus_files():
    if not CORPUS.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason="shared corpus is absent"))]
    return [pytest.param(p, id=p.name) for p in sorted(CORPUS.glob("*.xml"))]


def outcome(fn):
    try:
        return fn()
    except MscclDeadlockError as exc:
        return ("deadlock", str(exc))
    except MscclError as exc:
        return ("error", type(exc).__name__, str(exc))


def compare(alg, ins, op="sum", slice_elems=16):
    ref = outcome(lambda: reference.run(alg, ins, op, slice_elems=slice_elems))
    emu = outcome(lambda: emulated_run(alg, ins, op, slice_elems=slice_elems, watchdog=3.0))
    if isinstance(ref, tuple):
        assert isinstance(emu, tuple) and emu[0] == ref[0], (ref, emu)
        if ref[0] == "error":
            assert emu[2] == ref[2]
        return None
    assert not isinstance(emu, tuple), emu
    assert same(emu, ref)
    return emu


@pytest.mark.parametrize("path", corpus_files())
def test_corpus_file(path):
    from msccl_py.targets.msccl import read_xml
    alg = read_xml(path)
    ops = ["sum", "max"] if alg.collective in ("allreduce", "reduce_scatter", "reduce") else ["sum"]
    for op in ops:
        # 48 elements per chunk in slices of 16: three pipeline iterations
        ins = int_inputs(alg, 48, np.float32, op) if _has_inputs(alg) else None
        if ins is None:
            pytest.skip("the algorithm has no input chunks on rank 0")
        if compare(alg, ins, op) is None:
            break


def _has_inputs(alg) -> bool:
    from msccl_py.plan.tables import plan_for
    return int(plan_for(alg).call_chunks[0, 0]) > 0


def library_cases():
    try:
        from msccl_py import library
        names = library.names()
    except Exception as exc:  # noqa: BLE001 - the library may be broken mid-work
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=f"no library: {exc}"))]
    return [pytest.param(n, r, id=f"{n}-{r}") for n in names for r in (4, 8)]


@pytest.mark.parametrize("name,ranks", library_cases())
def test_library_program(name, ranks):
    from msccl_py import library
    try:
        alg = library.compile(name, num_ranks=ranks)
    except MscclError as exc:
        pytest.skip(f"{name} does not build at {ranks} ranks: {exc}")
    if not _has_inputs(alg):
        pytest.skip("no input chunks on rank 0")
    ops = (["sum", "prod", "min"] if alg.collective in ("allreduce", "reduce_scatter", "reduce")
           else ["sum"])
    for op, dtype in zip(ops, ("float32", "int32", "float16")):
        ins = int_inputs(alg, 20, dtype, op)
        if compare(alg, ins, op, slice_elems=8) is None:
            break
