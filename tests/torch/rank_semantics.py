"""One rank of the checks of what the ``msccl`` backend shares with gloo beyond plain calls:
every (dtype, op) gloo takes compared with a gloo group's result for the same inputs (bit for
bit: the float inputs are small integers, so every order of summing is exact), dtypes and ops
gloo lacks against the exact value, the coalesced calls (unequal sizes), sparse all_reduce,
point-to-point, resizable storages, group names, async calls and a timeout.

Started by :func:`ranks.launch`; prints ``FAIL ...`` per failed check and
``rank R: N checks, F failed``.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import msccl_py.torch  # noqa: F401  (registers "msccl")
from rank_checks import Checker

R = dist.ReduceOp
GLOO_DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
               torch.bfloat16, torch.float32, torch.float64]
OPS = {"SUM": R.SUM, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX, "BAND": R.BAND,
       "BOR": R.BOR, "BXOR": R.BXOR}


def inputs(c: Checker, dtype: torch.dtype, numel: int, tag: str, who: int) -> torch.Tensor:
    """Small integers (0/1 for bool), exact in every dtype and in any sum or product here."""
    x = c.value(torch.int64, numel, tag, who, op="prod").remainder(3 if dtype != torch.bool
                                                                   else 2)
    return x.to(dtype)


def against_gloo(c: Checker, gloo) -> None:
    me = c.rank
    for dtype in GLOO_DTYPES:
        for name, op in OPS.items():
            if name in ("BAND", "BOR", "BXOR") and dtype.is_floating_point:
                continue
            tag = f"gloo/{dtype}/{name}"
            x = inputs(c, dtype, 67, tag, me)
            ours, theirs = x.clone(), x.clone()
            c.guard(f"all_reduce {name} {dtype}", lambda: (
                dist.all_reduce(ours, op=op), dist.all_reduce(theirs, op=op, group=gloo),
                c.same(f"all_reduce {name} {dtype} equals gloo's", ours, theirs)))
            out, want = torch.empty(5, dtype=dtype), torch.empty(5, dtype=dtype)
            src = inputs(c, dtype, 5 * c.n, tag + "/rs", me)
            c.guard(f"reduce_scatter_tensor {name} {dtype}", lambda: (
                dist.reduce_scatter_tensor(out, src, op=op),
                dist.reduce_scatter_tensor(want, src, op=op, group=gloo)
                if name not in ("BAND", "BOR", "BXOR") and dtype != torch.bool else
                want.copy_(_local(c, dtype, 5 * c.n, tag + "/rs", name).view(c.n, 5)[me]),
                c.same(f"reduce_scatter_tensor {name} {dtype}", out, want)))
        # data movement of the same dtype
        x = inputs(c, dtype, 7, f"mv/{dtype}", me)
        got, want = [torch.empty_like(x) for _ in range(c.n)], [torch.empty_like(x)
                                                                for _ in range(c.n)]
        c.guard(f"all_gather {dtype}", lambda: (
            dist.all_gather(got, x), dist.all_gather(want, x, group=gloo),
            [c.same(f"all_gather {dtype} [{r}]", g, w) for r, (g, w) in
             enumerate(zip(got, want))]))


def float_order(c: Checker, gloo) -> None:
    """Float SUM/AVG reduce_scatter equals gloo's bit for bit (random values of many
    magnitudes, where the order of adding shows), at sizes whose blocks do and do not
    line up with gloo's segments."""
    for m in (37, 1000, 40713, 300001):
        for name, op in (("SUM", R.SUM), ("AVG", R.AVG)):
            g = torch.Generator().manual_seed(1000 * c.rank + m)
            x = torch.randn(m * c.n, generator=g) * 10.0 ** torch.randint(-4, 4, (m * c.n,),
                                                                           generator=g)
            ours, theirs = torch.empty(m), torch.empty(m)
            dist.reduce_scatter_tensor(ours, x.clone(), op=op)
            dist.reduce_scatter_tensor(theirs, x.clone(), op=op, group=gloo)
            c.count += 1
            if not torch.equal(ours, theirs):
                bad = (ours != theirs).nonzero().reshape(-1)
                c.fail(f"float32 reduce_scatter {name} of {m} a rank is gloo's bit for bit",
                       f"{bad.numel()} elements differ, first at {bad[:4].tolist()}")


def _local(c: Checker, dtype, numel, tag, name) -> torch.Tensor:
    """The reduction of every rank's :func:`inputs` computed here."""
    xs = [inputs(c, dtype, numel, tag, r).to(torch.int64 if dtype in (torch.uint16, torch.uint32)
                                                else dtype)
          for r in range(c.n)]
    fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor,
          "SUM": torch.add, "MAX": torch.maximum, "MIN": torch.minimum, "PRODUCT": torch.mul}
    acc = xs[0]
    for x in xs[1:]:
        acc = fn[name](acc, x)
    return acc.to(dtype)


def narrow_ints(c: Checker) -> None:
    """int16, uint16 and uint32 (gloo refuses them): against the value computed here."""
    for dtype in (torch.int16, torch.uint16, torch.uint32):
        for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
            tag = f"narrow/{dtype}/{name}"
            t = inputs(c, dtype, 33, tag, c.rank)
            c.guard(f"all_reduce {name} {dtype}", lambda: (
                dist.all_reduce(t, op=OPS[name]),
                c.same(f"all_reduce {name} {dtype}", t, _local(c, dtype, 33, tag, name))))
        x = inputs(c, dtype, 6, f"bc/{dtype}", 0) if c.rank == 0 else torch.zeros(6, dtype=dtype)
        c.guard(f"broadcast {dtype}", lambda: (
            dist.broadcast(x, src=0),
            c.same(f"broadcast {dtype}", x, inputs(c, dtype, 6, f"bc/{dtype}", 0))))
    # sums wrap as in int16
    t = torch.full((4,), 30000, dtype=torch.int16)
    dist.all_reduce(t)
    c.same("int16 SUM wraps", t, torch.full((4,), 30000 * c.n, dtype=torch.int64)
           .to(torch.int16))


def premul_sum(c: Checker) -> None:
    for factor in (2.5, torch.tensor([0.5])):
        t = c.value(torch.float32, 11, "premul", c.rank)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        f = float(factor) if not isinstance(factor, torch.Tensor) else float(factor[0])
        want = sum(c.value(torch.float32, 11, "premul", r).double() * f for r in range(c.n))
        c.same(f"PREMUL_SUM factor {factor}", t.double(), want)
    src = c.value(torch.float32, 3 * c.n, "premul/rs", c.rank)
    out = torch.empty(3)
    dist.reduce_scatter_tensor(out, src, op=dist._make_nccl_premul_sum(3.0))
    want = sum(c.value(torch.float32, 3 * c.n, "premul/rs", r).double() * 3 for r in range(c.n))
    c.same("reduce_scatter PREMUL_SUM", out.double(), want.view(c.n, 3)[c.rank])
    c.same("reduce_scatter PREMUL_SUM leaves the input", src,
           c.value(torch.float32, 3 * c.n, "premul/rs", c.rank))


def coalesced(c: Checker, gloo) -> None:
    me, n = c.rank, c.n
    sizes = [3, 1, 5]
    ins = [torch.arange(k, dtype=torch.float32) + 10 * me + j for j, k in enumerate(sizes)]
    ours = [[torch.empty(k) for k in sizes] for _ in range(n)]
    theirs = [[torch.empty(k) for k in sizes] for _ in range(n)]
    dist.all_gather_coalesced(ours, ins)
    dist.all_gather_coalesced(theirs, ins, group=gloo)
    for r in range(n):
        for j in range(len(sizes)):
            c.same(f"all_gather_coalesced [{r}][{j}] equals gloo's", ours[r][j], theirs[r][j])
    c.same("all_gather_coalesced [1][0] is rank 1's first tensor", ours[1][0],
           torch.arange(3, dtype=torch.float32) + 10)
    a = [t.clone() for t in ins]
    b = [t.clone() for t in ins]
    dist.all_reduce_coalesced(a, op=R.MAX)
    dist.all_reduce_coalesced(b, op=R.MAX, group=gloo)
    for j in range(len(sizes)):
        c.same(f"all_reduce_coalesced [{j}] equals gloo's", a[j], b[j])


def sparse(c: Checker, gloo) -> None:
    me, n = c.rank, c.n
    idx = torch.stack([torch.arange(me + 1), torch.zeros(me + 1, dtype=torch.int64)])
    t = torch.sparse_coo_tensor(idx, torch.ones(me + 1, 2), (n, 3, 2))
    ours, theirs = t.clone(), t.clone()
    dist.all_reduce(ours)
    dist.all_reduce(theirs, group=gloo)
    c.same("sparse all_reduce equals gloo's", ours.to_dense(), theirs.to_dense())


def point_to_point(c: Checker) -> None:
    me, n = c.rank, c.n
    for dtype in (torch.bool, torch.int16, torch.float32):
        send = inputs(c, dtype, 9, f"p2p/{dtype}", me)
        recv = torch.empty(9, dtype=dtype)
        ops = [dist.P2POp(dist.isend, send, (me + 1) % n),
               dist.P2POp(dist.irecv, recv, (me - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        c.same(f"batch_isend_irecv ring {dtype}", recv,
               inputs(c, dtype, 9, f"p2p/{dtype}", (me - 1) % n))


def storages(c: Checker) -> None:
    """After a call the caller can still free its tensor's storage (FSDP's resize_(0))."""
    for what, call in [
            ("all_reduce", lambda t: dist.all_reduce(t)),
            ("all_gather_into_tensor", lambda t: dist.all_gather_into_tensor(
                t, torch.ones(t.numel() // c.n))),
            ("broadcast", lambda t: dist.broadcast(t, src=0)),
            ("reduce_scatter_tensor", lambda t: dist.reduce_scatter_tensor(
                torch.empty(t.numel() // c.n), t))]:
        for numel in (4 * c.n, c.n << 16):
            t = torch.ones(numel)
            call(t)
            c.count += 1
            try:
                t.untyped_storage().resize_(0)
                t.untyped_storage().resize_(numel * 4)
            except RuntimeError as exc:
                c.fail(f"{what} of {numel} leaves the storage resizable", str(exc))


def names(c: Checker) -> None:
    pg = dist.distributed_c10d._get_default_group()
    sub = dist.new_group(backend="msccl")
    for what, g in (("default", pg), ("new_group", sub)):
        c.count += 1
        if not g.group_name or g._get_backend(torch.device("cpu")) is None:
            c.fail(f"{what} group has a name and a cpu backend", repr(g.group_name))
    c.count += 1
    if sub.group_name == pg.group_name:
        c.fail("groups have distinct names", sub.group_name)
    name = sub.group_name
    dist.destroy_process_group(sub)
    c.count += 1
    try:
        torch._C._distributed_c10d._resolve_process_group(name)
        c.fail("destroy_process_group(subgroup) unregisters its name", name)
    except (RuntimeError, ValueError):
        pass


def asynchronous(c: Checker) -> None:
    me, n = c.rank, c.n
    ts = [torch.full((1000 + k,), float(me + k)) for k in range(6)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    futs = [w.get_future() for w in works]
    for k, (t, w) in enumerate(zip(ts, works)):
        w.wait()
        c.same(f"async all_reduce #{k}", t, torch.full((1000 + k,), float(sum(range(n)) + n * k)))
    c.same("async future value", futs[-1].wait()[0], ts[-1])
    # a synchronous call after queued ones runs after them (issue order)
    a = torch.full((1 << 16,), 1.0)
    w = dist.all_reduce(a, async_op=True)
    dist.all_reduce(a)
    w.wait()
    c.same("sync after async: issue order", a, torch.full((1 << 16,), float(n * n)))
    # two groups in flight at once
    g2 = dist.new_group(backend="msccl")
    x, y = torch.ones(5000), torch.ones(5000) * 2
    w1, w2 = dist.all_reduce(x, async_op=True), dist.all_reduce(y, group=g2, async_op=True)
    w2.wait()
    w1.wait()
    c.same("two groups overlap: first", x, torch.full((5000,), float(n)))
    c.same("two groups overlap: second", y, torch.full((5000,), 2.0 * n))
    dist.destroy_process_group(g2)


def ddp_buckets(c: Checker) -> None:
    """DDP's bucket all_reduces are queued on the progress thread (the call returns and
    backward goes on), and the gradients are the ranks' mean."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    pg = dist.distributed_c10d._get_default_group()
    torch.manual_seed(0)
    layers = [torch.nn.Linear(512, 512) for _ in range(4)]
    model = DDP(torch.nn.Sequential(*layers), bucket_cap_mb=0.3)
    x = torch.full((8, 512), float(c.rank + 1))
    model(x).sum().backward()           # the first backward has one bucket; then DDP rebuilds
    model.zero_grad()
    queued = []
    submit = pg._worker.submit
    pg._worker.submit = lambda call: queued.append(1) or submit(call)
    try:
        model(x).sum().backward()
    finally:
        del pg._worker.submit
    c.count += 1
    if len(queued) < 3:
        c.fail("DDP buckets are asynchronous", f"{len(queued)} calls queued")
    torch.manual_seed(0)
    ref = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)])
    for r in range(c.n):
        ref(torch.full((8, 512), float(r + 1))).sum().backward()
    got, want = model.module[0].weight.grad, ref[0].weight.grad / c.n
    c.count += 1
    if not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
        c.fail("DDP gradient is the mean", f"largest difference {(got - want).abs().max()}")


def timeout(c: Checker) -> None:
    """Only rank 0 enters a call of a group with a 2 s timeout: a DistBackendError that names
    the ranks that never came, after 2 s (not before)."""
    from msccl_py.errors import MscclDeadlockError
    g = dist.new_group(backend="msccl", timeout=timedelta(seconds=2))
    if c.rank == 0:
        start = time.monotonic()
        c.count += 1
        try:
            dist.all_reduce(torch.ones(3), group=g)
            c.fail("timeout", "no error")
        except dist.DistBackendError as exc:
            took = time.monotonic() - start
            blamed = list(range(1, c.n))
            if not isinstance(exc, MscclDeadlockError) or f"rank(s) {blamed}" not in str(exc) \
                    or "Timed out after 2 s" not in str(exc) or not 2 <= took < 30:
                c.fail("timeout", f"{type(exc).__name__} after {took:.1f} s: {exc}")
    dist.barrier()


def main() -> None:
    dist.init_process_group("msccl", timeout=timedelta(seconds=120))
    c = Checker(dist.get_rank(), dist.get_world_size())
    gloo = dist.new_group(backend="gloo")
    checks = {"against gloo": lambda: against_gloo(c, gloo),
              "float order": lambda: float_order(c, gloo), "narrow ints": lambda: narrow_ints(c),
              "premul_sum": lambda: premul_sum(c), "coalesced": lambda: coalesced(c, gloo),
              "sparse": lambda: sparse(c, gloo), "point to point": lambda: point_to_point(c),
              "storages": lambda: storages(c), "names": lambda: names(c),
              "asynchronous": lambda: asynchronous(c), "DDP buckets": lambda: ddp_buckets(c),
              "timeout": lambda: timeout(c)}
    for what, fn in checks.items():
        c.guard(what, fn)
    print(f"rank {c.rank}: {c.count} checks, {len(c.failures)} failed", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
