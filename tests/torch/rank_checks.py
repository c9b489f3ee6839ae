"""One rank of the collective checks: every torch.distributed call on the ``msccl`` backend
against the exact result, computed in float64 from every rank's input and cast.

Started by :func:`ranks.launch` (torchrun's environment variables, one process per
rank). Each rank regenerates every rank's input from a seed, so it knows the exact
answer of each call. Integers must match bit for bit; float32/float64 within rtol
1e-6, float16/bfloat16 within rtol 1e-2 (atol 0: the inputs are positive, so no
cancellation hides an error). A ``gloo`` group over the same ranks runs the async
calls too, so each Work's ``get_future()`` value is compared with gloo's.

Prints ``FAIL <check>: <why>`` per failed check and ``rank R: N checks ok`` at the
end; exits 1 when anything failed.

    python rank_checks.py --dtypes float32 int8 --sizes 37 --groups collectives async
"""

from __future__ import annotations

import argparse
import sys
import traceback
import zlib
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

import msccl_py.torch  # noqa: F401  (registers "msccl")

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int8": torch.int8, "int32": torch.int32,
          "int64": torch.int64, "uint8": torch.uint8}
RTOL = {torch.float32: 1e-6, torch.float64: 1e-6, torch.float16: 1e-2, torch.bfloat16: 1e-2}
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "prod": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
GROUPS = ("collectives", "async", "strided", "refusals", "subgroups", "scalars")


class Checker:
    def __init__(self, rank: int, n: int):
        self.rank, self.n = rank, n
        self.count, self.failures = 0, []

    def value(self, dtype: torch.dtype, numel: int, tag: str, who: int, op: str = "sum"
              ) -> torch.Tensor:
        """Rank ``who``'s input of check ``tag`` (deterministic: every rank can make it)."""
        rng = np.random.default_rng([zlib.crc32(tag.encode()), who])
        if dtype.is_floating_point:
            lo, hi = (0.75, 1.25) if op == "prod" else (0.5, 2.0)
            x = rng.uniform(lo, hi, numel)
        elif op == "prod":
            x = rng.integers(1, 4, numel)             # 3**4 = 81 fits int8
        elif dtype == torch.uint8:
            x = rng.integers(0, 60, numel)
        else:
            lo = -20 if op in ("min", "max") else 0
            x = rng.integers(lo, 30, numel)           # 4 x 29 fits int8
        return torch.from_numpy(x.astype(np.float64)).to(dtype)

    def all_values(self, dtype, numel, tag, op="sum") -> list[torch.Tensor]:
        return [self.value(dtype, numel, tag, r, op) for r in range(self.n)]

    def reduced(self, xs: list[torch.Tensor], op: str, dtype) -> torch.Tensor:
        """The exact reduction in float64, cast to ``dtype``."""
        s = torch.stack([x.double() for x in xs])
        want = {"sum": lambda: s.sum(0), "avg": lambda: s.sum(0) / self.n,
                "prod": lambda: s.prod(0), "min": lambda: s.min(0).values,
                "max": lambda: s.max(0).values}[op]()
        return want.to(dtype)

    def same(self, what: str, got: torch.Tensor, want: torch.Tensor) -> None:
        self.count += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            self.fail(what, f"got {got.dtype} {tuple(got.shape)}, want {want.dtype} "
                            f"{tuple(want.shape)}")
            return
        if want.dtype.is_floating_point:
            ok = torch.allclose(got.double(), want.double(), rtol=RTOL[want.dtype], atol=0)
        else:
            ok = torch.equal(got, want)
        if not ok:
            g, w = got.double().reshape(-1), want.double().reshape(-1)
            worst = int(((g - w).abs() / w.abs().clamp_min(1e-300)).argmax())
            self.fail(what, f"{int((g != w).sum())} of {w.numel()} elements differ; worst at "
                            f"[{worst}]: got {g[worst].item()!r} want {w[worst].item()!r}")

    def fail(self, what: str, why: str) -> None:
        self.failures.append(what)
        print(f"FAIL rank {self.rank} {what}: {why}", flush=True)

    def guard(self, what: str, fn) -> None:
        try:
            fn()
        except Exception as exc:     # a raising call is a failed check, the others go on
            self.fail(what, f"raised {type(exc).__name__}: {exc}\n{traceback.format_exc()}")


# ----- every collective, synchronous -------------------------------------------------
def collectives(c: Checker, dtype: torch.dtype, m: int, async_op: bool = False,
                gloo=None) -> None:
    n, me = c.n, c.rank
    name = str(dtype).replace("torch.", "")
    mode = "async" if async_op else "sync"

    def run(call, *args, **kw):
        """Call a collective; for async, wait and compare the future's value with gloo's."""
        if not async_op:
            assert call(*args, **kw) is None
            return
        work = call(*args, async_op=True, **kw)
        fut = work.get_future()
        work.wait()
        val = fut.wait()
        c.count += 1
        if not work.is_completed() or not fut.done():
            c.fail(f"{mode} {call.__name__}", "not complete after wait()")
        if gloo is not None:
            ref = _gloo_future(call, args, kw, gloo)
            if ref is not _NO_FUTURE and _structure(val) != _structure(ref):
                c.fail(f"{mode} {call.__name__} {name} future",
                       f"value {_structure(val)}, gloo's {_structure(ref)}")

    ops = ["sum", "prod", "min", "max"] + (["avg"] if dtype.is_floating_point else [])
    for op in ops:
        tag = f"ar/{name}/{m}/{op}"
        t = c.value(dtype, m, tag, me, op)
        c.guard(f"{mode} all_reduce {op} {name} {m}",
                lambda: (run(dist.all_reduce, t, op=OPS[op]),
                         c.same(f"{mode} all_reduce {op} {name} {m}", t,
                                c.reduced(c.all_values(dtype, m, tag, op), op, dtype))))
    for root in sorted({0, n - 1}):
        tag = f"bc/{name}/{m}/{root}"
        t = c.value(dtype, m, tag, me) if me == root else torch.zeros(m, dtype=dtype)
        c.guard(f"{mode} broadcast root {root} {name}",
                lambda: (run(dist.broadcast, t, src=root),
                         c.same(f"{mode} broadcast root {root} {name}", t,
                                c.value(dtype, m, tag, root))))
    for op in ("sum", "max"):
        root = 1 % n
        tag = f"red/{name}/{m}/{op}"
        t = c.value(dtype, m, tag, me, op)

        def reduce_check():
            run(dist.reduce, t, dst=root, op=OPS[op])
            if me == root:
                c.same(f"{mode} reduce {op} {name}", t,
                       c.reduced(c.all_values(dtype, m, tag, op), op, dtype))
        c.guard(f"{mode} reduce {op} {name}", reduce_check)

    tag = f"ag/{name}/{m}"
    xs = c.all_values(dtype, m, tag)

    def all_gather_check():
        outs = [torch.zeros(m, dtype=dtype) for _ in range(n)]
        run(dist.all_gather, outs, xs[me].clone())
        c.same(f"{mode} all_gather {name}", torch.stack(outs), torch.stack(xs))
        flat = torch.zeros(n * m, dtype=dtype)
        run(dist.all_gather_into_tensor, flat, xs[me].clone())
        c.same(f"{mode} all_gather_into_tensor {name}", flat, torch.cat(xs))
    c.guard(f"{mode} all_gather {name}", all_gather_check)

    for op in ("sum", "min") + (("avg",) if dtype.is_floating_point else ()):
        tag = f"rs/{name}/{m}/{op}"
        full = c.all_values(dtype, n * m, tag, op)
        want = c.reduced(full, op, dtype)[me * m:(me + 1) * m]

        def reduce_scatter_check():
            out = torch.zeros(m, dtype=dtype)
            run(dist.reduce_scatter, out, list(full[me].clone().chunk(n)), op=OPS[op])
            c.same(f"{mode} reduce_scatter {op} {name}", out, want)

        def reduce_scatter_tensor_check():
            out2 = torch.zeros(m, dtype=dtype)
            run(dist.reduce_scatter_tensor, out2, full[me].clone(), op=OPS[op])
            c.same(f"{mode} reduce_scatter_tensor {op} {name}", out2, want)
        c.guard(f"{mode} reduce_scatter {op} {name}", reduce_scatter_check)
        c.guard(f"{mode} reduce_scatter_tensor {op} {name}", reduce_scatter_tensor_check)

    tag = f"a2a/{name}/{m}"
    full = c.all_values(dtype, n * m, tag)

    def all_to_all_single_check():
        out = torch.zeros(n * m, dtype=dtype)
        run(dist.all_to_all_single, out, full[me].clone())
        c.same(f"{mode} all_to_all_single {name}", out,
               torch.cat([full[j][me * m:(me + 1) * m] for j in range(n)]))
    c.guard(f"{mode} all_to_all_single {name}", all_to_all_single_check)

    # uneven splits, some empty, rows of 2 elements: rank r sends rows[r][j] rows to j
    rows = [[(r + 2 * j) % 3 for j in range(n)] for r in range(n)]
    tag = f"a2av/{name}/{m}"

    def all_to_all_uneven_check():
        mine = c.value(dtype, 2 * sum(rows[me]), tag, me).reshape(-1, 2)
        out = torch.zeros(sum(rows[j][me] for j in range(n)), 2, dtype=dtype)
        run(dist.all_to_all_single, out, mine, [rows[j][me] for j in range(n)], rows[me])
        want = []
        for j in range(n):
            theirs = c.value(dtype, 2 * sum(rows[j]), tag, j).reshape(-1, 2)
            start = sum(rows[j][:me])
            want.append(theirs[start:start + rows[j][me]])
        c.same(f"{mode} all_to_all_single uneven {name}", out, torch.cat(want))
        # the list form, uneven too
        ins = list(mine.split(rows[me]))
        outs = [torch.zeros(rows[j][me], 2, dtype=dtype) for j in range(n)]
        run(dist.all_to_all, outs, ins)
        c.same(f"{mode} all_to_all uneven {name}", torch.cat(outs), torch.cat(want))
    c.guard(f"{mode} all_to_all uneven {name}", all_to_all_uneven_check)

    root = n - 1
    tag = f"ga/{name}/{m}"
    xs = c.all_values(dtype, m, tag)

    def gather_check():
        outs = [torch.zeros(m, dtype=dtype) for _ in range(n)] if me == root else None
        run(dist.gather, xs[me].clone(), outs, dst=root)
        if me == root:
            c.same(f"{mode} gather {name}", torch.stack(outs), torch.stack(xs))
    c.guard(f"{mode} gather {name}", gather_check)

    src = 1 % n
    tag = f"sc/{name}/{m}"
    parts = c.all_values(dtype, m, tag)

    def scatter_check():
        out = torch.zeros(m, dtype=dtype)
        run(dist.scatter, out, [p.clone() for p in parts] if me == src else None, src=src)
        c.same(f"{mode} scatter {name}", out, parts[me])
    c.guard(f"{mode} scatter {name}", scatter_check)

    def send_recv_check():
        tag_ = f"p2p/{name}/{m}"
        nxt, prev = (me + 1) % n, (me - 1) % n
        got = torch.zeros(m, dtype=dtype)
        mine = c.value(dtype, m, tag_, me)
        if async_op:
            works = [dist.isend(mine, nxt, tag=7), dist.irecv(got, prev, tag=7)]
            for w in works:
                w.wait()
        elif me % 2 == 0:
            dist.send(mine, nxt, tag=7)
            dist.recv(got, prev, tag=7)
        else:
            dist.recv(got, prev, tag=7)
            dist.send(mine, nxt, tag=7)
        c.same(f"{mode} send/recv {name}", got, c.value(dtype, m, tag_, prev))
    c.guard(f"{mode} send/recv {name}", send_recv_check)

    c.guard(f"{mode} barrier", lambda: run(dist.barrier))


_NO_FUTURE = object()


def _gloo_future(call, args, kw, gloo):
    """The same call on the gloo group (fresh copies of the tensors), its future's value
    (``_NO_FUTURE`` where gloo has none or refuses the call: its reduce_scatter has no
    future, its all_to_all takes equal blocks only)."""
    def fresh(a):
        if isinstance(a, torch.Tensor):
            return a.clone()
        if isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
            return [t.clone() for t in a]
        return a
    if call is dist.all_to_all and len({t.shape for t in args[1]}) > 1:
        return _NO_FUTURE
    work = call(*[fresh(a) for a in args], group=gloo, async_op=True,
                **{k: fresh(v) for k, v in kw.items()})
    try:
        return work.get_future().wait()
    except RuntimeError as exc:
        if "getFuture not implemented" in str(exc):
            work.wait()
            return _NO_FUTURE
        raise


def _structure(v):
    """Nesting, types, dtypes and shapes of a future's value (not the numbers)."""
    if isinstance(v, torch.Tensor):
        return ("tensor", str(v.dtype), tuple(v.shape))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_structure(x) for x in v])
    return type(v).__name__


# ----- non-contiguous tensors ------------------------------------------------------------
def strided(c: Checker, dtype: torch.dtype) -> None:
    n, me = c.n, c.rank
    name = str(dtype).replace("torch.", "")

    def all_reduce_check():
        base = c.value(dtype, 6 * 5, f"st/ar/{name}", me).reshape(6, 5)
        col = base[:, 1]                       # stride 5
        keep = base.clone()
        dist.all_reduce(col)
        want = c.reduced([c.value(dtype, 30, f"st/ar/{name}", r).reshape(6, 5)[:, 1]
                          for r in range(n)], "sum", dtype)
        c.same(f"strided all_reduce {name}", col, want)
        keep[:, 1] = want
        c.same(f"strided all_reduce {name} leaves the rest", base, keep)
    c.guard(f"strided all_reduce {name}", all_reduce_check)

    def broadcast_check():
        t = c.value(dtype, 12, f"st/bc/{name}", me).reshape(3, 4).t()    # transposed
        dist.broadcast(t, src=0)
        c.same(f"strided broadcast {name}", t,
               c.value(dtype, 12, f"st/bc/{name}", 0).reshape(3, 4).t())
    c.guard(f"strided broadcast {name}", broadcast_check)

    def gather_checks():
        xs = [c.value(dtype, 8, f"st/ag/{name}", r).reshape(4, 2) for r in range(n)]
        outs = [torch.zeros(2, 4, dtype=dtype).t() for _ in range(n)]
        dist.all_gather(outs, xs[me].t().contiguous().t())
        c.same(f"strided all_gather {name}", torch.stack(outs), torch.stack(xs))
        big = torch.zeros(n * 8, 2, dtype=dtype)
        flat = big[:, 0]
        dist.all_gather_into_tensor(flat, xs[me].reshape(-1))
        c.same(f"strided all_gather_into_tensor {name}", flat,
               torch.cat([x.reshape(-1) for x in xs]))
        full = [c.value(dtype, 2 * n * 3, f"st/rs/{name}", r).reshape(n * 3, 2) for r in range(n)]
        out = torch.zeros(3, 2, dtype=dtype)
        dist.reduce_scatter_tensor(out[:, 0], full[me][:, 1])
        c.same(f"strided reduce_scatter_tensor {name}", out[:, 0],
               c.reduced([f[:, 1] for f in full], "sum", dtype)[me * 3:(me + 1) * 3])
        src = torch.stack([f[:, 0] for f in full], 1)[:, me]               # stride n
        got = torch.zeros(n * 3, dtype=dtype)
        dist.all_to_all_single(got, src)
        c.same(f"strided all_to_all_single {name}", got,
               torch.cat([full[j][me * 3:(me + 1) * 3, 0] for j in range(n)]))
    c.guard(f"strided gathers {name}", gather_checks)


# ----- what is refused, with an msccl_py error -------------------------------------------
def refusals(c: Checker) -> None:
    from msccl_py.errors import MscclError
    me = c.rank

    def refused(what: str, fn, words: str) -> None:
        c.count += 1
        try:
            fn()
        except MscclError as exc:
            if words not in str(exc):
                c.fail(f"refuses {what}", f"message {str(exc)!r} lacks {words!r}")
            elif not isinstance(exc, dist.DistError):
                c.fail(f"refuses {what}", f"{type(exc).__name__} is not a DistError")
            return
        except Exception as exc:
            c.fail(f"refuses {what}", f"raised {type(exc).__name__}, not an msccl_py error: "
                                      f"{exc}")
            return
        c.fail(f"refuses {what}", "no error")

    # what gloo refuses too (torch 2.13): bitwise ops of floats, AVG of bools
    refused("BAND of float32", lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND),
            "Cannot use ReduceOp.BAND with non-integral dtype torch.float32")
    refused("AVG of bool", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool),
                                                   op=dist.ReduceOp.AVG),
            "does not reduce bool tensors with AVG")
    refused("float8 reduction", lambda: dist.all_reduce(torch.zeros(4,
                                                                    dtype=torch.float8_e4m3fn)),
            "does not reduce torch.float8_e4m3fn tensors")
    refused("all_gather_into_tensor size",
            lambda: dist.all_gather_into_tensor(torch.zeros(5), torch.zeros(2)), "not")
    refused("reduce_scatter_tensor size",
            lambda: dist.reduce_scatter_tensor(torch.zeros(2), torch.zeros(5)), "not")
    refused("all_to_all_single uneven without splits",
            lambda: dist.all_to_all_single(torch.zeros(c.n * 2 + 1), torch.zeros(c.n * 2 + 1)),
            "split")
    refused("tag", lambda: dist.send(torch.zeros(1), (me + 1) % c.n, tag=1 << 30), "tag")
    # splits wrong on one rank only: every rank raises (none is left waiting for it)
    n = c.n
    outs = [1] * n if me else [2] + [1] * (n - 1)         # rank 0 expects 2 rows from rank 0
    refused("all_to_all_single splits disagreeing on rank 0",
            lambda: dist.all_to_all_single(torch.zeros(sum(outs)), torch.zeros(n), outs,
                                           [1] * n),
            "all_to_all on rank 0: output split sizes [2, ")
    bad_rank = n - 1                                       # its splits do not sum to its tensor
    refused("all_to_all_single splits not describing the tensor on one rank",
            lambda: dist.all_to_all_single(torch.zeros(n), torch.zeros(n), [1] * n,
                                           [1] * n if me != bad_rank else [2] * n),
            f"all_to_all on rank {bad_rank}: split sizes" if me == bad_rank else
            f"rank(s) [{bad_rank}] passed split sizes")
    dist.barrier()


def subgroups(c: Checker) -> None:
    """``new_group(backend="msccl")``: halves of the world, and a second whole-world group."""
    n, me = c.n, c.rank
    halves = [list(range(0, n // 2)), list(range(n // 2, n))]
    groups = [dist.new_group(h, backend="msccl") for h in halves]   # every rank makes both
    k = 0 if me < n // 2 else 1
    mine, members = groups[k], halves[k]
    xs = {r: c.value(torch.float32, 9, "sub/ar", r) for r in members}
    t = xs[me].clone()
    dist.all_reduce(t, group=mine)
    c.same(f"subgroup {members} all_reduce", t, c.reduced(list(xs.values()), "sum",
                                                           torch.float32))
    root = members[-1]                      # rooted calls name the global rank
    t = c.value(torch.int32, 5, "sub/bc", me)
    dist.broadcast(t, src=root, group=mine)
    c.same(f"subgroup {members} broadcast from {root}", t, c.value(torch.int32, 5, "sub/bc", root))
    again = dist.new_group(backend="msccl")
    t = c.value(torch.int64, 7, "sub/all", me)
    dist.all_reduce(t, group=again)
    c.same("second world group all_reduce", t,
           c.reduced(c.all_values(torch.int64, 7, "sub/all"), "sum", torch.int64))


def scalars(c: Checker) -> None:
    """0-dim tensors, as training loops reduce losses and counters."""
    n, me = c.n, c.rank
    loss = torch.tensor(0.5 + me, dtype=torch.float32)
    dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    c.same("0-dim all_reduce avg", loss, torch.tensor(sum(0.5 + r for r in range(n)) / n))
    count = torch.tensor(me + 1, dtype=torch.int64)
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    c.same("0-dim all_reduce max", count, torch.tensor(n, dtype=torch.int64))
    flag = torch.tensor(7 if me == n - 1 else 0, dtype=torch.uint8)
    dist.broadcast(flag, src=n - 1)
    c.same("0-dim broadcast", flag, torch.tensor(7, dtype=torch.uint8))
    outs = [torch.tensor(-1.0) for _ in range(n)]
    dist.all_gather(outs, torch.tensor(float(me * me)))
    c.same("0-dim all_gather", torch.stack(outs), torch.tensor([float(r * r) for r in range(n)]))
    # rows of no elements: the splits still count rows
    got = torch.zeros(n, 0)
    dist.all_to_all_single(got, torch.zeros(n, 0))
    dist.all_to_all_single(got, torch.zeros(n, 0), [1] * n, [1] * n)
    c.same("all_to_all_single rows of 0 elements", got, torch.zeros(n, 0))
    flat = torch.zeros(n)
    dist.all_gather_into_tensor(flat, torch.tensor(float(me)))
    c.same("0-dim all_gather_into_tensor", flat, torch.arange(n, dtype=torch.float32))


def complex_sum(c: Checker) -> None:
    """torch hands a complex SUM to the backend as float pairs (view_as_real)."""
    xs = [torch.complex(c.value(torch.float32, 5, "cx/re", r),
                        c.value(torch.float32, 5, "cx/im", r)) for r in range(c.n)]
    t = xs[c.rank].clone()
    dist.all_reduce(t)
    c.same("all_reduce complex64 sum", torch.view_as_real(t),
           c.reduced([torch.view_as_real(x) for x in xs], "sum", torch.float32))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", nargs="+", default=list(DTYPES))
    ap.add_argument("--sizes", nargs="+", type=int, default=[37])
    ap.add_argument("--groups", nargs="+", default=list(GROUPS), choices=GROUPS)
    ap.add_argument("--backend", default="msccl", help="the default group's (gloo: to see what "
                    "gloo gives for the same checks)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds a call may wait for the others (init_process_group's)")
    args = ap.parse_args()
    dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))
    c = Checker(dist.get_rank(), dist.get_world_size())
    gloo = dist.new_group(backend="gloo") if "async" in args.groups else None
    for dname in args.dtypes:
        dtype = DTYPES[dname]
        for m in args.sizes:
            if "collectives" in args.groups:
                collectives(c, dtype, m)
            if "async" in args.groups:
                collectives(c, dtype, m, async_op=True, gloo=gloo)
        if "strided" in args.groups:
            strided(c, dtype)
    if "refusals" in args.groups:
        refusals(c)
        c.guard("all_reduce complex64 sum", lambda: complex_sum(c))
    if "scalars" in args.groups:
        c.guard("scalars", lambda: scalars(c))
    if "subgroups" in args.groups:
        c.guard("subgroups", lambda: subgroups(c))
    pg = dist.distributed_c10d._get_default_group()
    if args.backend == "msccl":
        c.count += 1
        if type(pg).__name__ != "ProcessGroupMSCCL" or dist.get_backend() != "msccl":
            c.fail("backend", f"the default group is {pg!r} ({dist.get_backend()})")
        for call, why in sorted(pg.comm.fallbacks.items(), key=str):
            print(f"fallback {call}: {why}", flush=True)
    print(f"rank {c.rank}: {c.count} checks, {len(c.failures)} failed", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
