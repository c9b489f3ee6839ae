"""Small hand-built IR programs for every collective, any rank count.

The communicator takes its programs from :mod:`msccl_py.library`; these are
what it falls back on when the library has no program for a rank count (or is
not importable), and they give the runtime's tests algorithms that do not
depend on the compiler. Each is the textbook schedule: rings for allreduce,
allgather and reduce_scatter, direct exchange for alltoall, gather and
scatter, chains for broadcast and reduce. ``channels`` splits the data over
independent rings (one threadblock each).

>>> alg = allreduce_ring(4)
>>> [s.code for s in alg.gpus[0].threadblocks[0].steps]
['s', 'rrs', 'rrs', 'rrcs', 'rcs', 'rcs', 'r']
"""

from __future__ import annotations

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError
from msccl_py.ir import Loc, Step, Threadblock


def _alg(name: str, collective: str, n: int, ncpl: int, gpus: list[ir.Gpu],
         inplace: bool = False) -> ir.Algorithm:
    return ir.Algorithm(name, collective, "Simple", inplace, n, ncpl,
                        1 + max((tb.channel for g in gpus for tb in g.threadblocks), default=0),
                        gpus, outofplace=True)


def allreduce_ring(n: int, channels: int = 1) -> ir.Algorithm:
    """Ring allreduce (reduce-scatter then allgather), ``n * channels`` chunks."""
    gpus = []
    for r in range(n):
        tbs = []
        for ch in range(channels):
            base = ch * n

            def c(k: int, base: int = base, r: int = r) -> int:
                return base + (r - k) % n
            if n == 1:
                steps = [Step("copy", Loc("i", base), Loc("o", base))]
                tbs.append(Threadblock(ch, -1, -1, ch, steps))
                continue
            steps = [Step("send", Loc("i", c(0)), Loc("o", c(0)))]
            steps += [Step("recv_reduce_send", Loc("i", c(k)), Loc("i", c(k))) for k in range(1, n - 1)]
            steps.append(Step("recv_reduce_copy_send", Loc("i", c(n - 1)), Loc("o", c(n - 1))))
            steps += [Step("recv_copy_send", Loc("o", c(k)), Loc("o", c(k)))
                      for k in range(n, 2 * n - 2)]
            steps.append(Step("recv", Loc("o", c(2 * n - 2)), Loc("o", c(2 * n - 2))))
            tbs.append(Threadblock(ch, (r + 1) % n, (r - 1) % n, ch, steps))
        gpus.append(ir.Gpu(r, n * channels, n * channels, 0, tbs))
    return _alg(f"allreduce_ring_{n}", "allreduce", n, n * channels, gpus, inplace=True)


def allgather_ring(n: int) -> ir.Algorithm:
    """Ring allgather: each rank forwards what it received to the next."""
    gpus = []
    for r in range(n):
        steps = [Step("copy", Loc("i", 0), Loc("o", r))]
        if n > 1:
            steps.append(Step("send", Loc("i", 0), Loc("o", r)))
            steps += [Step("recv_copy_send", Loc("o", (r - k) % n), Loc("o", (r - k) % n))
                      for k in range(1, n - 1)]
            steps.append(Step("recv", Loc("o", (r + 1) % n), Loc("o", (r + 1) % n)))
        tbs = [Threadblock(0, (r + 1) % n if n > 1 else -1, (r - 1) % n if n > 1 else -1, 0,
                           steps)]
        gpus.append(ir.Gpu(r, 1, n, 0, tbs))
    return _alg(f"allgather_ring_{n}", "allgather", n, n, gpus, inplace=True)


def reduce_scatter_ring(n: int) -> ir.Algorithm:
    """Ring reduce-scatter: rank r ends with the reduction of chunk r."""
    gpus = []
    for r in range(n):
        if n == 1:
            steps = [Step("copy", Loc("i", 0), Loc("o", 0))]
        else:
            def c(k: int, r: int = r) -> int:
                return (r + n - 1 - k) % n
            steps = [Step("send", Loc("i", c(0)), Loc("i", c(0)))]
            steps += [Step("recv_reduce_send", Loc("i", c(k)), Loc("i", c(k)))
                      for k in range(1, n - 1)]
            steps.append(Step("recv_reduce_copy", Loc("i", r), Loc("o", 0)))
        tbs = [Threadblock(0, (r + 1) % n if n > 1 else -1, (r - 1) % n if n > 1 else -1, 0,
                           steps)]
        gpus.append(ir.Gpu(r, n, 1, 0, tbs))
    return _alg(f"reduce_scatter_ring_{n}", "reduce_scatter", n, n, gpus, inplace=True)


def alltoall_direct(n: int) -> ir.Algorithm:
    """Direct alltoall: threadblock k sends block r+k and receives block r-k."""
    gpus = []
    for r in range(n):
        tbs = [Threadblock(0, -1, -1, 0, [Step("copy", Loc("i", r), Loc("o", r))])]
        for k in range(1, n):
            to, frm = (r + k) % n, (r - k) % n
            tbs.append(Threadblock(k, to, frm, 0, [Step("send", Loc("i", to), Loc("o", r)),
                                                   Step("recv", Loc("i", r), Loc("o", frm))]))
        gpus.append(ir.Gpu(r, n, n, 0, tbs))
    return _alg(f"alltoall_direct_{n}", "alltoall", n, n, gpus)


def _chain(name: str, collective: str, n: int, root: int, block) -> ir.Algorithm:
    """One threadblock per rank, ``block(k, next, previous)`` for the rank k after the root."""
    gpus = [ir.Gpu(r, 1, 1, 0, [block((r - root) % n, (r + 1) % n, (r - 1) % n)])
            for r in range(n)]
    return _alg(f"{name}_{n}_root{root}", collective, n, 1, gpus)


def broadcast_chain(n: int, root: int = 0) -> ir.Algorithm:
    """Chain broadcast root -> root+1 -> ... (pipelined by the runtime's slices)."""
    def block(k, nxt, prv):
        if k == 0:
            steps = [Step("copy", Loc("i", 0), Loc("o", 0))]
            if n > 1:
                steps.append(Step("send", Loc("i", 0), Loc("o", 0)))
            return Threadblock(0, nxt if n > 1 else -1, -1, 0, steps)
        if k < n - 1:
            return Threadblock(0, nxt, prv, 0, [Step("recv_copy_send", Loc("o", 0), Loc("o", 0))])
        return Threadblock(0, -1, prv, 0, [Step("recv", Loc("o", 0), Loc("o", 0))])
    return _chain("broadcast_chain", "broadcast", n, root, block)


def reduce_chain(n: int, root: int = 0) -> ir.Algorithm:
    """Chain reduce root+1 -> root+2 -> ... -> root, partial sums forwarded."""
    def block(k, nxt, prv):
        if n == 1:
            return Threadblock(0, -1, -1, 0, [Step("copy", Loc("i", 0), Loc("o", 0))])
        if k == 0:
            return Threadblock(0, -1, prv, 0, [Step("recv_reduce_copy", Loc("i", 0),
                                                    Loc("o", 0))])
        if k == 1:
            return Threadblock(0, nxt, -1, 0, [Step("send", Loc("i", 0), Loc("i", 0))])
        return Threadblock(0, nxt, prv, 0, [Step("recv_reduce_send", Loc("i", 0), Loc("i", 0))])
    return _chain("reduce_chain", "reduce", n, root, block)


def gather_direct(n: int, root: int = 0) -> ir.Algorithm:
    """Every rank sends its block straight to the root's output block."""
    gpus = []
    for r in range(n):
        if r == root:
            tbs = [Threadblock(0, -1, -1, 0, [Step("copy", Loc("i", 0), Loc("o", r))])]
            tbs += [Threadblock(len(tbs) + i, -1, q, 0, [Step("recv", Loc("i", 0), Loc("o", q))])
                    for i, q in enumerate(q for q in range(n) if q != root)]
        else:
            tbs = [Threadblock(0, root, -1, 0, [Step("send", Loc("i", 0), Loc("o", r))])]
        gpus.append(ir.Gpu(r, 1, n, 0, tbs))
    return _alg(f"gather_direct_{n}_root{root}", "gather", n, n, gpus)


def scatter_direct(n: int, root: int = 0) -> ir.Algorithm:
    """The root sends block q of its input straight to rank q."""
    gpus = []
    for r in range(n):
        if r == root:
            tbs = [Threadblock(0, -1, -1, 0, [Step("copy", Loc("i", r), Loc("o", 0))])]
            tbs += [Threadblock(len(tbs) + i, q, -1, 0, [Step("send", Loc("i", q), Loc("o", 0))])
                    for i, q in enumerate(q for q in range(n) if q != root)]
        else:
            tbs = [Threadblock(0, -1, root, 0, [Step("recv", Loc("i", r), Loc("o", 0))])]
        gpus.append(ir.Gpu(r, n, 1, 0, tbs))
    return _alg(f"scatter_direct_{n}_root{root}", "scatter", n, n, gpus)


#: collective -> builder(n, root) used by the communicator's fallback
BUILDERS = {
    "allreduce": lambda n, root: allreduce_ring(n),
    "allgather": lambda n, root: allgather_ring(n),
    "reduce_scatter": lambda n, root: reduce_scatter_ring(n),
    "alltoall": lambda n, root: alltoall_direct(n),
    "broadcast": broadcast_chain,
    "reduce": reduce_chain,
    "gather": gather_direct,
    "scatter": scatter_direct,
}


def fallback(collective: str, n: int, root: int = 0) -> ir.Algorithm:
    """The built-in program for ``collective`` on ``n`` ranks.

    >>> fallback("gather", 3, root=1).gpus[1].output_chunks
    3
    """
    if collective not in BUILDERS:
        raise MscclRuntimeError(f"no built-in program for collective {collective!r}")
    if not 0 <= root < n:
        raise MscclRuntimeError(f"root {root} is not a rank of {n}")
    return BUILDERS[collective](n, root)
