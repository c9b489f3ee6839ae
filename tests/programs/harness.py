"""Compile a library program, verify it and run it on the reference runtime against NumPy.

The oracle here is independent of the program's own ``Check()``: the
verifier replays the lowered IR symbolically, and the reference runtime
executes it on random data whose correct result NumPy computes from the
collective's definition.
"""

from __future__ import annotations

import numpy as np

from msccl_py import library
from msccl_py.runtime import reference
from msccl_py.runtime.expected import expected
from msccl_py.plan.tables import plan_for
from msccl_py.verify import verify

STANDARD = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce")
CHUNK_ELEMS = 3


def inputs_for(alg, rng, dtype=np.int64) -> list[np.ndarray]:
    """Random inputs sized as the runtime sizes a call (call chunks × CHUNK_ELEMS)."""
    cc = plan_for(alg).call_chunks
    return [rng.integers(-50, 50, size=int(cc[r, 0]) * CHUNK_ELEMS).astype(dtype)
            for r in range(alg.ngpus)]


def oracle(spec, params: dict, alg, inputs: list[np.ndarray], op: str) -> list:
    """Each rank's correct output (None where unspecified), from the operation's definition."""
    n = alg.ngpus
    root = params.get("root", 0)
    per = alg.nchunksperloop // n * CHUNK_ELEMS
    if spec.operation in STANDARD:
        return expected(alg, inputs, op, root=root)
    if spec.operation == "gather":
        whole = np.concatenate([x[:per] for x in inputs])
        return [whole if r == root else None for r in range(n)]
    if spec.operation == "scatter":
        return [inputs[root][r * per:(r + 1) * per] for r in range(n)]
    if spec.operation == "barrier":
        assert op == "max"
        return [np.max(np.stack(inputs), axis=0) for _ in range(n)]
    if spec.operation == "alltonext":
        if spec.name == "alltonext_backward":
            return [inputs[r + 1] if r + 1 < n else None for r in range(n)]
        cyclic = params.get("cyclic", False)
        return [inputs[r - 1] if r or cyclic else None for r in range(n)]
    raise AssertionError(f"no oracle for {spec.operation}")


def check_program(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
                  op: str | None = None, seed: int = 0, **params):
    """Compile, verify and run one configuration; returns the algorithm. Asserts on failure."""
    spec = library.get(name)
    alg = library.compile(name, num_ranks, instances=instances, protocol=protocol,
                          use_cache=False, **params)
    values = spec.resolve(num_ranks, params)
    assert alg.ngpus == num_ranks
    root = values.get("root") or 0
    target = "msccl" if alg.collective == "custom" else "msccl-executor"
    verdict = verify(alg, target=target, root=root)
    assert verdict.status == "ok", f"{name} n={num_ranks} x{instances} {protocol}: {verdict}"
    op = op or ("max" if spec.operation == "barrier" else "sum")
    rng = np.random.default_rng(seed)
    inputs = inputs_for(alg, rng)
    outputs = reference.run(alg, inputs, op)
    want = oracle(spec, values, alg, inputs, op)
    for r, (got, exp) in enumerate(zip(outputs, want)):
        if exp is not None:
            # the runtime may size a rooted call's buffers larger than the program uses
            np.testing.assert_array_equal(got[:exp.size], exp,
                                          err_msg=f"{name} n={num_ranks} rank {r}")
    return alg
