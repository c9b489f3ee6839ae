"""One of two ranks exchanging engine frames (started by test_engines.py, not collected).

``python engine_worker.py mpi`` under ``mpirun -np 2``, or ``python
engine_worker.py gloo RANK PORT`` twice (rank 0 hosts the TCP store). Rank 0
sends a header and a payload of every dtype the communicator moves; rank 1
receives them into arrays of the same dtype and checks the bits. It prints
``RESULT {json}``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from msccl_py.runtime.bfloat16 import BF16
from msccl_py.transport.engines import HEADER_WORDS

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")


def _payload(dtype: str, k: int) -> np.ndarray:
    raw = np.arange(64 * 8, dtype=np.uint8) * (k + 3)
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    return raw.view(dt)[: 37 + k]     # an odd length: whole elements, not whole words


def main(argv: list[str]) -> int:
    kind = argv[1]
    if kind == "mpi":
        from mpi4py import MPI

        from msccl_py.transport.engines import MpiEngine
        engine = MpiEngine(MPI.COMM_WORLD)
    else:
        from datetime import timedelta

        import torch.distributed as dist

        from msccl_py.transport.engines import GlooEngine
        rank, port = int(argv[2]), int(argv[3])
        store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timedelta(seconds=30))
        engine = GlooEngine.from_store(store, rank, 2, 30.0)
    rank = engine.rank
    out = {"rank": rank, "engine": engine.name, "bad": []}
    if rank == 0:
        for k, dtype in enumerate(DTYPES):
            hdr = np.full(HEADER_WORDS, k, dtype=np.int64)
            engine.send(1, hdr, _payload(dtype, k))
        engine.flush()
        out["bytes_sent"] = engine.bytes_sent
        out["frames_sent"] = engine.frames_sent
        hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
        engine.recv_header(hdr)          # rank 1's "done": keep the group up until then
    else:
        for k, dtype in enumerate(DTYPES):
            hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
            peer = engine.recv_header(hdr)
            want = _payload(dtype, k)
            got = np.zeros_like(want)
            engine.recv_payload(peer, got)
            if peer != 0 or not np.all(hdr == k) or got.tobytes() != want.tobytes():
                out["bad"].append(dtype)
        engine.send(0, np.zeros(HEADER_WORDS, dtype=np.int64))
        engine.flush()
    engine.close()
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")     # one write: whole under mpirun
    sys.stdout.flush()
    return 1 if out["bad"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
