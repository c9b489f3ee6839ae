"""Small algorithms built directly in IR, for tests, benchmarks and examples.

They depend on nothing but :mod:`msccl_py.ir`, so the verifier and runtimes
can be exercised without the DSL.

>>> alg = ring_allreduce(4, channels=2)
>>> alg.num_steps(), alg.nchunksperloop
(56, 8)
"""

from __future__ import annotations

from msccl_py import ir


def ring_allreduce(ranks: int, channels: int = 1, protocol: str = "Simple",
                   count: int = 1) -> ir.Algorithm:
    """In-place ring allreduce: per channel a reduce-scatter then an allgather around the ring.

    Each channel owns ``ranks * count`` consecutive chunks; a step moves
    ``count`` chunks. Steps per threadblock: ``2 * ranks - 1``.
    """
    R, C = ranks, channels
    n = R * C * count
    gpus = []
    for r in range(R):
        nxt, prv = (r + 1) % R, (r - 1) % R
        tbs = []
        for ch in range(C):
            def loc(c: int, _ch=ch) -> ir.Loc:
                return ir.Loc("i", (_ch * R + c % R) * count)

            steps = [ir.Step("send", loc(r), loc(r), count)]
            steps += [ir.Step("recv_reduce_send", loc(r - j), loc(r - j), count)
                      for j in range(1, R - 1)]
            steps.append(ir.Step("recv_reduce_copy_send", loc(r + 1), loc(r + 1), count))
            steps += [ir.Step("recv_copy_send", loc(r - j + 1), loc(r - j + 1), count)
                      for j in range(1, R - 1)]
            steps.append(ir.Step("recv", loc(r + 2), loc(r + 2), count))
            tbs.append(ir.Threadblock(ch, send_peer=nxt, recv_peer=prv, channel=ch, steps=steps))
        gpus.append(ir.Gpu(r, n, n, 0, tbs))
    return ir.Algorithm(f"ring_allreduce_{R}x{C}", "allreduce", protocol, True, R, n, C, gpus,
                        outofplace=False)


def ring_allgather(ranks: int, protocol: str = "Simple") -> ir.Algorithm:
    """Out-of-place ring allgather with a local copy first and a dependency on it."""
    R = ranks
    gpus = []
    for r in range(R):
        nxt, prv = (r + 1) % R, (r - 1) % R
        copy_tb = ir.Threadblock(1, steps=[ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", r),
                                                   has_dependents=True)])
        steps = [ir.Step("send", ir.Loc("o", r), ir.Loc("o", r), depends=[(1, 0)])]
        steps += [ir.Step("recv_copy_send", ir.Loc("o", (r - j) % R), ir.Loc("o", (r - j) % R))
                  for j in range(1, R - 1)]
        steps.append(ir.Step("recv", ir.Loc("o", (r + 1) % R), ir.Loc("o", (r + 1) % R)))
        ring_tb = ir.Threadblock(0, send_peer=nxt, recv_peer=prv, steps=steps)
        gpus.append(ir.Gpu(r, 1, R, 0, [ring_tb, copy_tb]))
    return ir.Algorithm(f"ring_allgather_{R}", "allgather", protocol, False, R, R, 1, gpus,
                        outofplace=True)


def allpairs_allreduce(ranks: int, protocol: str = "Simple") -> ir.Algorithm:
    """In-place allpairs allreduce where every pair first sends, then receives, ``ranks`` chunks.

    Chunk block r (``ranks`` chunks) belongs to rank r: every rank sends block p
    to rank p in one step of count ``ranks`` and receives the peers' copies of
    its own block into scratch, reduces them in, and sends the result back.
    Each pair sends before it receives, so once a step is more transfers than
    a FIFO holds (large messages; Simple holds 2) it deadlocks, like the
    corpus' ``ar_allpair_simple``.
    """
    R = ranks
    n = R * R
    gpus = []
    for r in range(R):
        tbs = []
        for k, p in enumerate(q for q in range(R) if q != r):
            tbs.append(ir.Threadblock(k, send_peer=p, recv_peer=p, steps=[
                ir.Step("send", ir.Loc("i", p * R), ir.Loc("s", r * R), R),
                ir.Step("recv", ir.Loc("i", r * R), ir.Loc("s", p * R), R, has_dependents=True)]))
        red = R - 1
        steps = [ir.Step("reduce", ir.Loc("s", p * R), ir.Loc("i", r * R), R,
                         depends=[(k, 1)]) for k, p in enumerate(q for q in range(R) if q != r)]
        steps[-1].has_dependents = True
        tbs.append(ir.Threadblock(red, steps=steps))
        # second round: send the reduced block to every peer, receive theirs
        for k, p in enumerate(q for q in range(R) if q != r):
            tbs.append(ir.Threadblock(R + k, send_peer=p, recv_peer=p, channel=1, steps=[
                ir.Step("send", ir.Loc("i", r * R), ir.Loc("i", r * R), R, depends=[(red, R - 2)]),
                ir.Step("recv", ir.Loc("i", p * R), ir.Loc("i", p * R), R)]))
        gpus.append(ir.Gpu(r, n, n, n, tbs))
    return ir.Algorithm(f"allpairs_allreduce_{R}", "allreduce", protocol, True, R, n, 2, gpus,
                        outofplace=False)
