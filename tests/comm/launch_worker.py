"""One rank of a launch test: join with ``msccl_py.init()`` and check every collective.

Started by the tests under mpirun or torchrun (not collected by pytest: no
``test_`` prefix). Every rank draws every rank's inputs from the same seeds,
so it can compute the exact result itself (in float64, cast back), runs each
collective through the joined communicator and compares its own output.
It prints one ``RESULT {json}`` line: the cases checked, the failures, the
layout and transports it saw and the bytes its link sent to other hosts.

Modes (first argument):

* ``all [GROUPS]``: every collective, for each ``COUNT:DTYPES:OPS`` group
  (``;``-separated; default: every dtype and op at 37 elements, a count no
  program divides);
* ``die R``: after one correct all_reduce, the ranks loop on 4 MiB
  all_reduces and rank R is killed (SIGKILL, from a timer thread, so inside
  a call); the others must fail and exit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import numpy as np

import msccl_py
from msccl_py.runtime.bfloat16 import BF16, from_float32, to_float32

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")
OPS = ("sum", "prod", "max", "min", "avg")
RTOL = {"float32": 1e-5, "float64": 1e-12, "float16": 1e-2, "bfloat16": 1e-2}


def _inputs(dtype: str, op: str, rank: int, count: int) -> np.ndarray:
    """Rank ``rank``'s input, as float64 values exactly representable in ``dtype``."""
    rng = np.random.default_rng(1000 * rank + DTYPES.index(dtype) * 10 + len(op))
    if op == "prod":
        vals = rng.integers(1, 3, count).astype(np.float64)   # 1 or 2: no overflow
    elif dtype in ("int8", "uint8"):
        vals = rng.integers(0, 30, count).astype(np.float64)   # sum of 4 fits in int8
    elif dtype.startswith("int"):
        vals = rng.integers(-1000, 1000, count).astype(np.float64)
    else:
        vals = rng.integers(-64, 64, count) / 4.0                # exact in every float type
    return vals


def _cast(vals: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return from_float32(vals.astype(np.float32))
    return vals.astype(dtype)


def _back(x: np.ndarray, dtype: str) -> np.ndarray:
    return to_float32(x).astype(np.float64) if dtype == "bfloat16" else x.astype(np.float64)


def _reduce(vals: list[np.ndarray], op: str, dtype: str, n: int) -> np.ndarray:
    stack = np.stack(vals)
    if op in ("sum", "avg"):
        out = stack.sum(0)
        if op == "avg":
            out = np.trunc(out / n) if dtype.startswith(("int", "uint")) else out / n
        return out
    return {"prod": np.prod, "max": np.max, "min": np.min}[op](stack, axis=0)


def _close(got: np.ndarray | None, want: np.ndarray, dtype: str) -> bool:
    if got is None or got.size != want.size:
        return False
    g = _back(np.asarray(got).reshape(-1), dtype)
    w = _back(_cast(want, dtype), dtype)        # the exact result, cast as the dtype holds it
    if dtype in RTOL:
        return bool(np.allclose(g, w, rtol=RTOL[dtype], atol=0))
    return bool(np.array_equal(g, w))


def check_all(comm, groups: list[tuple[int, tuple[str, ...], tuple[str, ...]]]) -> dict:
    """Every collective at each (per-rank element count, dtypes, ops) of ``groups``: each
    dtype, and for the reductions each op."""
    n, r = comm.world_size, comm.rank
    bad: list[str] = []
    cases = 0

    def case(name: str, ok: bool) -> None:
        nonlocal cases
        cases += 1
        if not ok:
            bad.append(name)

    for count, dtypes, ops in groups:
        blk = count // n      # block collectives use world-size multiples
        for dtype in dtypes:
            for op in ops:
                ins = [_inputs(dtype, op, k, count) for k in range(n)]
                want = _reduce(ins, op, dtype, n)
                x = _cast(ins[r], dtype)
                case(f"all_reduce {dtype} {op} {count}", _close(comm.all_reduce(x, op), want,
                                                                  dtype))
                y = x.copy()
                comm.all_reduce(y, op, out=y)
                case(f"all_reduce in place {dtype} {op} {count}", _close(y, want, dtype))
                root = (count + len(op)) % n
                got = comm.reduce(x, root=root, op=op)
                case(f"reduce {dtype} {op} root {root} {count}",
                     _close(got, want, dtype) if r == root else got is None)
                xs = _cast(ins[r][:blk * n], dtype)
                mine = _reduce([v[:blk * n] for v in ins], op, dtype, n)[r * blk:(r + 1) * blk]
                case(f"reduce_scatter {dtype} {op} {count}",
                     _close(comm.reduce_scatter(xs, op), mine, dtype))
            ins = [_inputs(dtype, "sum", k, count) for k in range(n)]
            x = _cast(ins[r], dtype)
            root = count % n
            case(f"broadcast {dtype} root {root} {count}",
                 _close(comm.broadcast(x if r == root else None, root=root), ins[root], dtype))
            case(f"all_gather {dtype} {count}",
                 _close(comm.all_gather(x), np.concatenate(ins), dtype))
            got = comm.gather(x, root=(root + 1) % n)
            case(f"gather {dtype} root {(root + 1) % n} {count}",
                 _close(got, np.concatenate(ins), dtype) if r == (root + 1) % n else got is None)
            xs = _cast(ins[r][:blk * n], dtype)
            case(f"all_to_all {dtype} {count}",
                 _close(comm.all_to_all(xs),
                        np.concatenate([v[r * blk:(r + 1) * blk] for v in ins]), dtype))
            sroot = (root + 2) % n
            case(f"scatter {dtype} root {sroot} {count}",
                 _close(comm.scatter(_cast(ins[sroot][:blk * n], dtype) if r == sroot else None,
                                     root=sroot), ins[sroot][r * blk:(r + 1) * blk], dtype))
        comm.barrier()
        cases += 1
    return {"cases": cases, "bad": bad}


#: every dtype and op at a count no program's chunking divides
SMALL = "37:" + ",".join(DTYPES) + ":" + ",".join(OPS)


def parse_groups(text: str) -> list[tuple[int, tuple[str, ...], tuple[str, ...]]]:
    """``COUNT:DTYPE,..:OP,..`` groups separated by ``;``."""
    groups = []
    for part in text.split(";"):
        count, dtypes, ops = part.split(":")
        groups.append((int(count), tuple(dtypes.split(",")), tuple(ops.split(","))))
    return groups


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "all"
    own_group = os.environ.get("WORKER_TORCH_PG") == "1"
    if own_group:   # the script's own torch.distributed group comes first: init uses its store
        import torch.distributed as dist
        dist.init_process_group("gloo")
    t0 = time.perf_counter()
    comm = msccl_py.init(timeout=float(os.environ.get("WORKER_TIMEOUT", "60")))
    joined = time.perf_counter() - t0
    out = {"rank": comm.rank, "world": comm.world_size, "layout": comm.layout.describe(),
           "transports": comm.transports, "init_s": round(joined, 3)}
    if mode == "all":
        t1 = time.perf_counter()
        out.update(check_all(comm, parse_groups(argv[2] if len(argv) > 2 else SMALL)))
        out["check_s"] = round(time.perf_counter() - t1, 3)
    elif mode == "die":
        victim = int(argv[2])
        x = np.ones(1 << 20, dtype=np.float32)
        ok = bool(np.all(comm.all_reduce(x) == comm.world_size))
        print(f"READY rank {comm.rank} {ok}", flush=True)
        if comm.rank == victim:     # dies from another thread, inside a call of the loop
            def die() -> None:
                print(f"KILLED at {time.time():.3f}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            threading.Timer(0.5, die).start()
        while True:
            comm.all_reduce(x)
    if own_group:   # and the script's group still works beside the communicator
        import torch
        t = torch.full((4,), float(comm.rank))
        dist.all_reduce(t)
        out["torch_group"] = t.tolist()
    stats = comm.transport_stats()
    out.update(engine=stats["engine"], link_bytes=stats["bytes"],
               link_transfers=stats["transfers"])
    comm.close()
    if own_group:
        dist.destroy_process_group()
    sys.stdout.write("RESULT " + json.dumps(out) + "\n")     # one write: whole under mpirun
    sys.stdout.flush()
    return 1 if out.get("bad") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
