"""Hand-built algorithms and helpers for the GPU-runtime tests (no shared data needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from msccl_py import ir

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared"
CORPUS = SHARED / "corpus" / "xml"

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def ring_allreduce(n: int, protocol: str = "Simple", channels: int = 1) -> ir.Algorithm:
    """In-place ring allreduce, ``channels`` rings each on its own chunk set."""
    gpus = []
    ncpl = n * channels
    for r in range(n):
        tbs = []
        for ch in range(channels):
            base = ch * n
            c = lambda k: ir.Loc("i", base + (k % n))  # noqa: E731
            steps = [ir.Step("send", c(r), c(r))]
            steps += [ir.Step("recv_reduce_send", c(r - k), c(r - k)) for k in range(1, n - 1)]
            steps.append(ir.Step("recv_reduce_copy_send", c(r + 1), c(r + 1)))
            steps += [ir.Step("recv_copy_send", c(r - k), c(r - k)) for k in range(0, n - 2)]
            steps.append(ir.Step("recv", c(r + 2), c(r + 2)))
            tbs.append(ir.Threadblock(ch, send_peer=(r + 1) % n, recv_peer=(r - 1) % n,
                                      channel=ch, steps=steps))
        gpus.append(ir.Gpu(r, ncpl, ncpl, 0, tbs))
    return ir.Algorithm(f"ring{n}", "allreduce", protocol, True, n, ncpl, channels, gpus,
                        outofplace=False)


def gather_reduce(n: int = 3) -> ir.Algorithm:
    """``reduce`` to rank 0 through scratch and a fused multi-source ``re``.

    Rank 0 receives every peer's chunk into its own scratch chunk on its own
    threadblock, then threadblock 0 copies its input and reduces all scratch
    chunks into the output with consecutive ``re`` steps (which fuse).
    """
    tbs0 = [ir.Threadblock(0, steps=[
        ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", 0)),
        ir.Step("reduce", ir.Loc("s", 0), ir.Loc("o", 0),
                depends=[(p, 0) for p in range(1, n)]),
        *[ir.Step("reduce", ir.Loc("s", p - 1), ir.Loc("o", 0)) for p in range(2, n)]])]
    for p in range(1, n):
        tbs0.append(ir.Threadblock(p, recv_peer=p, steps=[
            ir.Step("recv", ir.Loc("i", 0), ir.Loc("s", p - 1), has_dependents=True)]))
    gpus = [ir.Gpu(0, 1, 1, n - 1, tbs0)]
    for p in range(1, n):
        gpus.append(ir.Gpu(p, 1, 1, 0, [ir.Threadblock(0, send_peer=0, steps=[
            ir.Step("send", ir.Loc("i", 0), ir.Loc("s", p - 1))])]))
    return ir.Algorithm("gather_reduce", "reduce", "Simple", False, n, 1, 1, gpus)


def fifo_deadlock_xml(protocol: str = "Simple") -> str:
    """Two ranks that each send 4 chunks, then receive 4: deadlocks once a send
    needs more transfers than the FIFO holds (large messages), fine when small."""
    steps = ('      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="4" '
             'depid="-1" deps="-1" hasdep="0"/>\n'
             '      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="4" '
             'depid="-1" deps="-1" hasdep="0"/>\n')
    gpus = "".join(f'  <gpu id="{r}" i_chunks="4" o_chunks="4" s_chunks="0">\n'
                   f'    <tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">\n{steps}'
                   '    </tb>\n  </gpu>\n' for r in range(2))
    return (f'<algo name="fifo_deadlock" proto="{protocol}" nchannels="1" nchunksperloop="4" '
            'ngpus="2" coll="custom" inplace="0" outofplace="1" minBytes="0" maxBytes="0">\n'
            f"{gpus}</algo>\n")


def int_inputs(alg: ir.Algorithm, chunk_elems: int, dtype, op: str = "sum",
               seed: int = 0) -> list[np.ndarray]:
    """Integer-valued inputs small enough that every op is exact in every dtype."""
    from msccl_py.runtime.plan import plan_for
    cc = plan_for(alg).call_chunks
    rng = np.random.default_rng(seed)
    lo, hi = {"prod": (1, 3), "max": (0, 100), "min": (0, 100)}.get(op, (0, 8))
    return [rng.integers(lo, hi, int(cc[r, 0]) * chunk_elems).astype(dtype)
            for r in range(alg.ngpus)]


def same(a, b) -> bool:
    """Equal outputs, NaN (unwritten poison) matching NaN."""
    if len(a) != len(b):
        return False
    return all(np.array_equal(x, y, equal_nan=np.asarray(x).dtype.kind == "f")
               for x, y in zip(a, b))
