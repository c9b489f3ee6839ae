"""Scale checks of the verifier and the NumPy reference runtime.

``python benchmarks/verify_scale.py``:

1. verify: a ring allreduce built in IR (40 ranks x 32 channels, 101,120
   steps) is verified (static rules, connections, both deadlock regimes,
   symbolic data in two schedules); the time must stay under 10 s. It is
   also written to XML and read back, and the file verified, when
   ``msccl_py.targets.msccl`` is available.
2. reference: a 64 MiB (per rank) float32 allreduce on an 8-rank ring with
   the NCCL Simple slice; reports call time, payload moved by the steps'
   copies and reductions (bytes read into FIFOs plus bytes written out of
   them, per transfer) and that rate, which must be at least 1 GB/s.

Options: ``--ranks``/``--channels`` for part 1, ``--mib`` for part 2,
``--skip-verify``/``--skip-reference``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from msccl_py.runtime import reference
from msccl_py.runtime.expected import expected
from msccl_py.plan.tables import IS_RECV, IS_SEND, S_COUNT, S_OP, plan_for
from msccl_py.verify import verify
from msccl_py.verify.samples import ring_allreduce


def bench_verify(ranks: int, channels: int) -> float:
    alg = ring_allreduce(ranks, channels)
    t0 = time.perf_counter()
    v = verify(alg, target="msccl")
    dt = time.perf_counter() - t0
    print(f"verify: {alg.num_steps()} steps ({ranks} ranks x {channels} channels): "
          f"{dt:.2f} s -> {v}")
    try:
        from msccl_py.targets.msccl import read_xml, write_xml
    except ImportError:
        return dt
    text = write_xml(alg, target="msccl")
    t0 = time.perf_counter()
    back = read_xml(text)
    t1 = time.perf_counter()
    v2 = verify(back, target="msccl")
    t2 = time.perf_counter()
    print(f"verify from XML ({len(text) / 1e6:.1f} MB): read {t1 - t0:.2f} s + verify "
          f"{t2 - t1:.2f} s -> {v2.status}")
    return dt


def payload_bytes(alg, S: int, itemsize: int) -> int:
    """Bytes the steps move: per step, count*S elements read plus written per role."""
    plan = plan_for(alg)
    st = plan.steps
    sends = IS_SEND[st[:, S_OP]].astype(np.int64)
    recvs = IS_RECV[st[:, S_OP]].astype(np.int64)
    local = 1 - ((sends + recvs) > 0)
    # a send copies into the FIFO, a receive copies out, a local op copies once
    moves = sends + recvs + local
    return int((st[:, S_COUNT] * moves).sum()) * S * itemsize


def bench_reference(mib: int, ranks: int = 8) -> float:
    alg = ring_allreduce(ranks)
    n = (mib << 20) // 4
    S = n // alg.nchunksperloop
    inputs = [np.full(n, r + 1, np.float32) for r in range(ranks)]
    reference.run(alg, inputs)  # warm-up: page in the buffers
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        outs = reference.run(alg, inputs)
        times.append(time.perf_counter() - t0)
    t = min(times)
    ok = all(np.array_equal(o, e) for o, e in zip(outs, expected(alg, inputs)))
    moved = payload_bytes(alg, S, 4)
    rate = moved / t / 1e9
    print(f"reference: {mib} MiB float32 allreduce, {ranks}-rank ring: {t * 1e3:.0f} ms/call, "
          f"{'correct' if ok else 'WRONG'}; payload {moved / 2**20:.0f} MiB moved by copies -> "
          f"{rate:.2f} GB/s (input data {ranks * mib / 1024 / t:.2f} GiB/s)")
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=40)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--skip-verify", action="store_true")
    ap.add_argument("--skip-reference", action="store_true")
    a = ap.parse_args()
    if not a.skip_verify:
        bench_verify(a.ranks, a.channels)
    if not a.skip_reference:
        bench_reference(a.mib)


if __name__ == "__main__":
    main()
