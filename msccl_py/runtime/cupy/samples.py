"""Small hand-built algorithms the GPU runtime's checks use (no library, no shared data).

``ring_allreduce`` is the classic in-place ring (one threadblock per ring and
rank); ``gather_reduce`` exercises scratch, dependencies and fused ``re``;
``fifo_deadlock_xml`` deadlocks exactly when a send needs more transfers than
a FIFO holds, i.e. for large messages only.

>>> alg = ring_allreduce(4, channels=2)
>>> alg.nchunksperloop, sum(len(g.threadblocks) for g in alg.gpus)
(8, 8)
"""

from __future__ import annotations

from msccl_py import ir


def ring_allreduce(n: int, protocol: str = "Simple", channels: int = 1) -> ir.Algorithm:
    """In-place ring allreduce, ``channels`` rings each on its own chunk set.

    Per rank and ring: s, (n-2) rrs, rrcs, (n-2) rcs, r, the XML shape of
    ns3-msccl's ring files.
    """
    gpus = []
    ncpl = n * channels
    for r in range(n):
        tbs = []
        for ch in range(channels):
            def c(k: int, base: int = ch * n) -> ir.Loc:
                return ir.Loc("i", base + (k % n))
            steps = [ir.Step("send", c(r), c(r))]
            steps += [ir.Step("recv_reduce_send", c(r - k), c(r - k)) for k in range(1, n - 1)]
            steps.append(ir.Step("recv_reduce_copy_send", c(r + 1), c(r + 1)))
            steps += [ir.Step("recv_copy_send", c(r - k), c(r - k)) for k in range(n - 2)]
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


def many_blocks(nblocks: int) -> ir.Algorithm:
    """One rank with ``nblocks`` threadblocks, each copying its own chunk: a wide grid.

    >>> len(many_blocks(5).gpus[0].threadblocks)
    5
    """
    tbs = [ir.Threadblock(t, steps=[ir.Step("copy", ir.Loc("i", t), ir.Loc("o", t))])
           for t in range(nblocks)]
    return ir.Algorithm(f"wide{nblocks}", "custom", "Simple", False, 1, nblocks, 1,
                        [ir.Gpu(0, nblocks, nblocks, 0, tbs)])
