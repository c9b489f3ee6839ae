"""A second, deliberately different implementation of the MSCCL runtime semantics.

Used only by tests to cross-check the verifier. It works from the IR alone
(no plan tables, no geometry module), at the granularity of NCCL slices and
FIFO slots: each connection is an 8-slot FIFO with a head and a tail counter;
a Simple primitive call is 2 slices of 2 slots, an LL/LL128 call 1 slice of
1 slot. Threadblocks are polled round-robin, each advancing at most one slice
per round, until all finish or a whole round makes no progress (deadlock).
Data are real integer arrays, so correctness is checked numerically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py import ir

SLOTS = 8
BUFFSIZE = {"Simple": 1 << 22, "LL": 1 << 19, "LL128": 120 * 640 * 8 * 8}


def iteration_bytes(protocol: str, buffsize: int | None) -> int:
    size = BUFFSIZE[protocol] if buffsize is None else buffsize
    slot = size // SLOTS
    if protocol == "Simple":
        return slot * 4
    if protocol == "LL":
        return slot // 2
    return slot // 128 * 120


@dataclass
class Outcome:
    deadlock: bool
    outputs: list | None


def run(alg: ir.Algorithm, S: int, buffsize: int | None = None, inplace: bool | None = None):
    """Execute ``alg`` with ``S`` int64 elements per chunk; inputs rank*1000 + element index."""
    itemsize = 8
    per_iter = max(1, iteration_bytes(alg.protocol, buffsize) // itemsize)
    mac = min(71, max(1, per_iter // S))
    iters = -(-S // per_iter)
    slices = 2 if alg.protocol == "Simple" else 1
    slot_per_slice = 2 if alg.protocol == "Simple" else 1
    n, g = alg.nchunksperloop, alg.ngpus
    coll = alg.collective
    in_chunks = n // g if coll == "allgather" else n
    out_chunks = n // g if coll == "reduce_scatter" else n
    if inplace is None:
        inplace = alg.inplace and not alg.outofplace
    bufs = []
    inputs = []
    for r, gpu in enumerate(alg.gpus):
        x = np.arange(in_chunks * S, dtype=np.int64) + 1000 * (r + 1)
        inputs.append(x)
        scratch = np.full(max(1, gpu.scratch_chunks) * S, -7, np.int64)
        if not inplace:
            out = np.full(out_chunks * S, -7, np.int64)
            b = {"i": x.copy(), "o": out, "s": scratch}
        elif coll == "allgather":
            out = np.full(out_chunks * S, -7, np.int64)
            out[r * in_chunks * S:(r + 1) * in_chunks * S] = x
            b = {"o": out, "i": out[r * in_chunks * S:(r + 1) * in_chunks * S], "s": scratch}
        elif coll == "reduce_scatter":
            inp = x.copy()
            b = {"i": inp, "o": inp[r * out_chunks * S:(r + 1) * out_chunks * S], "s": scratch}
        else:
            inp = x.copy()
            b = {"i": inp, "o": inp, "s": scratch}
        bufs.append(b)

    fifos = {}   # (chan, src, dst) -> [queue of slice arrays, tail, head]
    flags = {}   # (rank, tb) -> (iteration, step) last published
    states = []
    for gpu in alg.gpus:
        for tb in gpu.threadblocks:
            states.append({"rank": gpu.rank, "tb": tb, "it": 0, "k": 0, "piece": 0, "sl": 0,
                           "held": None, "done": not tb.steps or iters == 0})

    def region(rank, loc, chunk0, nchunks, it):
        buf = bufs[rank][loc.buffer]
        lo = it * per_iter
        hi = min(S, lo + per_iter)
        rows = [buf[(loc.offset + c) * S + lo:(loc.offset + c) * S + hi]
                for c in range(chunk0, chunk0 + nchunks)]
        return rows

    def split(arr):
        parts = np.array_split(arr, slices)
        return parts

    def advance(st):
        tb, rank = st["tb"], st["rank"]
        step = tb.steps[st["k"]]
        it = st["it"]
        if st["piece"] == 0 and st["sl"] == 0:
            for dep_tb, dep_k in step.depends:
                if flags.get((rank, dep_tb), (-1, -1)) < (it, dep_k):
                    return False
        c0 = st["piece"] * mac
        cnt = min(mac, step.count - c0)
        is_send, is_recv = step.op in ir.SENDS, step.op in ir.RECVS
        if step.count == 0:
            finish(st, step)
            return True
        if not (is_send or is_recv):
            src = region(rank, step.src, c0, step.count, it)
            dst = region(rank, step.dst, c0, step.count, it)
            for s_, d_ in zip(src, dst):
                if step.op == "copy":
                    d_[:] = s_
                else:
                    d_[:] = d_ + s_
            finish(st, step)
            return True
        rkey = (tb.channel, tb.recv_peer, rank)
        skey = (tb.channel, rank, tb.send_peer)
        rq = fifos.setdefault(rkey, [[], 0, 0]) if is_recv else None
        sq = fifos.setdefault(skey, [[], 0, 0]) if is_send else None
        if is_recv and not rq[0]:
            return False
        if is_send and sq[1] - sq[2] + slot_per_slice > SLOTS:
            return False
        if st["sl"] == 0:
            # materialise this primitive call's local operand as one flat block
            st["held"] = None
        got = None
        if is_recv:
            got = rq[0].pop(0)
            rq[2] += slot_per_slice
        local_src = None
        if step.op in ir.READS_SRC:
            local_src = np.concatenate(region(rank, step.src, c0, cnt, it))
        if step.op == "send":
            out = split(local_src)[st["sl"]].copy()
        else:
            if step.op in ir.REDUCES:
                got = got + split(local_src)[st["sl"]]
            out = got
            if step.op in ir.WRITES_DST:
                st["held"] = (out if st["held"] is None else np.concatenate([st["held"], out]))
        if is_send:
            sq[0].append(out)
            sq[1] += slot_per_slice
        st["sl"] += 1
        if st["sl"] == slices:
            if step.op in ir.WRITES_DST:
                flat = st["held"]
                pos = 0
                for row in region(rank, step.dst, c0, cnt, it):
                    row[:] = flat[pos:pos + row.size]
                    pos += row.size
            st["sl"] = 0
            st["piece"] += 1
            if st["piece"] * mac >= step.count:
                finish(st, step)
        return True

    def finish(st, step):
        if step.has_dependents:
            flags[(st["rank"], st["tb"].id)] = (st["it"], st["k"])
        st["piece"] = 0
        st["sl"] = 0
        st["k"] += 1
        if st["k"] == len(st["tb"].steps):
            st["k"] = 0
            st["it"] += 1
            if st["it"] == iters:
                st["done"] = True

    while True:
        progress = False
        for st in states:
            if not st["done"] and advance(st):
                progress = True
        if all(st["done"] for st in states):
            break
        if not progress:
            return Outcome(True, None), inputs
    outs = [np.array(b["o"][:out_chunks * S]) for b in bufs]
    return Outcome(False, outs), inputs
