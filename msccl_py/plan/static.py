"""Static rules: the structure every MSCCL runtime needs before it can run an algorithm.

Each rule of the MSCCL XML format that survives into the IR (dense ids,
peers, one threadblock per FIFO end, channels, buffer bounds, counts,
dependency targets that publish a flag, fused-reduction chains). A target's
own limits (:mod:`msccl_py.targets.msccl.dialects`) come in as a function the
caller passes. Findings carry the rank, threadblock and step.

>>> from msccl_py import ir
>>> tb = ir.Threadblock(0, steps=[ir.Step("send", ir.Loc("i", 0), ir.Loc("i", 0))])
>>> alg = ir.Algorithm("a", "custom", "Simple", False, 1, 1, 1, [ir.Gpu(0, 1, 1, 0, [tb])])
>>> [str(f) for f in check_static(alg)]
['rank 0 tb 0 step 0: send-type step in a threadblock without a send peer']
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from msccl_py import ir
from msccl_py.errors import LimitError, XmlError
from msccl_py.plan.findings import Finding
from msccl_py.plan.geometry import MAX_COUNT
from msccl_py.plan.reductions import fused_reductions
from msccl_py.plan.tables import layout_chunks, layout_of
from msccl_py.plan.tables import (
    B_RANK,
    B_RECV_PEER,
    B_SEND_PEER,
    D_STEP,
    IS_RECV,
    IS_SEND,
    LOCAL_DST,
    LOCAL_SRC,
    OP_REDUCE,
    S_BLOCK,
    S_COUNT,
    S_DST_BUF,
    S_DST_OFF,
    S_HAS_DEP,
    S_OP,
    S_SRC_BUF,
    S_SRC_OFF,
    Plan,
)

KNOWN_OPS = frozenset(ir.OP_CODES)


def _f(message: str, rank=None, tb=None, step=None) -> Finding:
    return Finding("static", message, rank, tb, step)


def check_algorithm(alg: ir.Algorithm) -> list[Finding]:
    """Algorithm-level attributes: sizes, ranks, collective and chunk counts."""
    out: list[Finding] = []
    if alg.protocol not in ir.PROTOCOLS:
        out.append(_f(f"unknown protocol {alg.protocol!r}; expected one of "
                      f"{', '.join(ir.PROTOCOLS)}"))
    if alg.collective not in ir.COLLECTIVES:
        out.append(_f(f"unknown collective {alg.collective!r}"))
    if alg.nchunksperloop <= 0:
        out.append(_f(f"nchunksperloop must be positive, got {alg.nchunksperloop}"))
    if not 1 <= alg.nchannels:
        out.append(_f(f"nchannels must be at least 1, got {alg.nchannels}"))
    if alg.ngpus < 1:
        out.append(_f(f"ngpus must be at least 1, got {alg.ngpus}"))
    if alg.max_bytes and alg.min_bytes > alg.max_bytes:
        out.append(_f(f"minBytes={alg.min_bytes} exceeds maxBytes={alg.max_bytes}: no call size "
                      "selects the algorithm"))
    elif alg.ngpus != len(alg.gpus):
        out.append(_f(f"ngpus is {alg.ngpus} but {len(alg.gpus)} gpus are listed"))
    for pos, gpu in enumerate(alg.gpus):
        if gpu.rank != pos:
            out.append(_f(f"gpu at position {pos} has id {gpu.rank}; ids must be 0..ngpus-1 "
                          "in order", rank=gpu.rank))
    mult = alg.chunk_multiplier
    n, g = alg.nchunksperloop, max(1, alg.ngpus)
    if mult > 1 and n % g:
        out.append(Finding("collective", f"{alg.collective} needs nchunksperloop divisible by "
                           f"ngpus; {n} is not a multiple of {g}"))
    layout = layout_of(alg.collective)
    want = layout_chunks(layout, n, g)
    for gpu in alg.gpus:
        for name, have in (("i_chunks", gpu.input_chunks), ("o_chunks", gpu.output_chunks),
                           ("s_chunks", gpu.scratch_chunks)):
            if have < 0:
                out.append(_f(f"{name} is negative ({have})", rank=gpu.rank))
        if layout == "declared":
            continue
        for name, have, expect in (("i_chunks", gpu.input_chunks, want[0]),
                                   ("o_chunks", gpu.output_chunks, want[1])):
            if have not in (0, expect):
                out.append(Finding("collective", f"{name}={have} but {alg.collective} with "
                                   f"nchunksperloop={n} and ngpus={g} needs {expect} (or 0 if "
                                   "unused)", rank=gpu.rank))
    return out


def _check_operand(gpu: ir.Gpu, tb: ir.Threadblock, k: int, step: ir.Step, loc, role: str,
                   out: list[Finding]) -> None:
    if loc is None:
        out.append(_f(f"{step.op} needs a local {role} operand", gpu.rank, tb.id, k))
        return
    if loc.buffer not in ir.BUFFERS:
        out.append(_f(f"unknown {role} buffer {loc.buffer!r}", gpu.rank, tb.id, k))
        return
    size = gpu.chunks(loc.buffer)
    if loc.offset < 0 or loc.offset + step.count > size:
        out.append(_f(f"{role} {loc.buffer}[{loc.offset}:{loc.offset + step.count}] is out of "
                      f"bounds: buffer {loc.buffer} has {size} chunks", gpu.rank, tb.id, k))


def check_threadblocks(alg: ir.Algorithm, plan: Plan | None = None) -> list[Finding]:
    """Threadblock ids, peers, channels, FIFO ends, steps and dependency targets.

    With ``alg``'s ``plan`` the step rules are first checked on its columns at once
    (:func:`steps_sound`); only when that finds something are the steps walked one by
    one, to word the findings.
    """
    out: list[Finding] = []
    walk = plan is None or not steps_sound(plan)
    ngpus = len(alg.gpus)
    for gpu in alg.gpus:
        r = gpu.rank
        by_id = {}
        for tb in gpu.threadblocks:
            if tb.id in by_id:
                out.append(_f(f"duplicate threadblock id {tb.id}", r, tb.id))
            by_id.setdefault(tb.id, tb)
        ids = sorted(by_id)
        if ids != list(range(len(ids))):
            missing = sorted(set(range(max(ids) + 1)) - set(ids)) if ids else []
            what = f"missing id {missing[0]}" if missing else "ids must start at 0"
            out.append(_f(f"threadblock ids must be dense from 0 ({what})", r))
        send_end: dict[tuple[int, int], int] = {}
        recv_end: dict[tuple[int, int], int] = {}
        for tb in gpu.threadblocks:
            for role, peer in (("send", tb.send_peer), ("recv", tb.recv_peer)):
                if peer != -1 and not (0 <= peer < ngpus and peer != r):
                    out.append(_f(f"{role} peer {peer} is not another rank (ranks 0.."
                                  f"{ngpus - 1}, -1 for none)", r, tb.id))
            if not 0 <= tb.channel < alg.nchannels:
                out.append(_f(f"channel {tb.channel} outside 0..{alg.nchannels - 1} "
                              f"(nchannels={alg.nchannels})", r, tb.id))
            for ends, peer, role in ((send_end, tb.send_peer, "send to"),
                                     (recv_end, tb.recv_peer, "receive from")):
                if peer < 0:
                    continue
                other = ends.setdefault((tb.channel, peer), tb.id)
                if other != tb.id:
                    out.append(_f(f"threadblocks {other} and {tb.id} both {role} rank {peer} on "
                                  f"channel {tb.channel}; each (channel, peer) direction is one "
                                  "FIFO and takes one threadblock", r, tb.id))
            if walk:
                _check_steps(alg, gpu, tb, by_id, out)
    return out


def steps_sound(plan: Plan) -> bool:
    """True only when no step breaks a rule :func:`_check_steps` checks (False may be
    a false alarm: a ``reduce`` step sends every threadblock to the detailed walk)."""
    st, blocks = plan.steps, plan.blocks
    if not len(st):
        return True
    op, count = st[:, S_OP], st[:, S_COUNT]
    if (op == OP_REDUCE).any() or (count < 0).any() or (count >= MAX_COUNT).any():
        return False
    own = blocks[st[:, S_BLOCK]]
    if (IS_SEND[op] & (own[:, B_SEND_PEER] < 0)).any() or (
            IS_RECV[op] & (own[:, B_RECV_PEER] < 0)).any():
        return False
    rank = own[:, B_RANK]
    for local, buf_col, off_col in ((LOCAL_SRC, S_SRC_BUF, S_SRC_OFF),
                                    (LOCAL_DST, S_DST_BUF, S_DST_OFF)):
        buf, off = st[:, buf_col], st[:, off_col]
        size = plan.chunks[rank, np.maximum(buf, 0)]
        if (local[op] & ((buf < 0) | (off < 0) | (off + count > size))).any():
            return False
    target = plan.deps[:, D_STEP] if len(plan.deps) else np.zeros(0, dtype=np.int64)
    return bool((target >= 0).all() and (st[target, S_HAS_DEP] == 1).all())


def _check_steps(alg: ir.Algorithm, gpu: ir.Gpu, tb: ir.Threadblock, by_id: dict,
                 out: list[Finding]) -> None:
    r = gpu.rank
    sizes = {ir.INPUT: gpu.input_chunks, ir.OUTPUT: gpu.output_chunks,
             ir.SCRATCH: gpu.scratch_chunks}
    sends, recvs, reads, writes = ir.SENDS, ir.RECVS, ir.READS_SRC, ir.WRITES_DST
    no_send, no_recv = tb.send_peer < 0, tb.recv_peer < 0
    has_reduce = False
    for k, step in enumerate(tb.steps):
        op, count = step.op, step.count
        if op not in KNOWN_OPS:
            out.append(_f(f"unknown op {op!r}", r, tb.id, k))
            continue
        if not 0 <= count < MAX_COUNT:
            out.append(_f(f"count {count} outside 0..{MAX_COUNT - 1}", r, tb.id, k))
        if no_send and op in sends:
            out.append(_f("send-type step in a threadblock without a send peer", r, tb.id, k))
        if no_recv and op in recvs:
            out.append(_f("recv-type step in a threadblock without a recv peer", r, tb.id, k))
        if op in reads:
            loc = step.src
            # the common case inline; _check_operand words the finding
            if (loc is None or loc.buffer not in sizes or loc.offset < 0
                    or loc.offset + count > sizes[loc.buffer]):
                _check_operand(gpu, tb, k, step, loc, "source", out)
        if op in writes:
            loc = step.dst
            if (loc is None or loc.buffer not in sizes or loc.offset < 0
                    or loc.offset + count > sizes[loc.buffer]):
                _check_operand(gpu, tb, k, step, loc, "destination", out)
        if op == "reduce":
            has_reduce = True
        for dep_tb, dep_step in step.depends:
            target = by_id.get(dep_tb)
            if target is None:
                out.append(_f(f"depends on threadblock {dep_tb}, which rank {r} does not have",
                              r, tb.id, k))
            elif not 0 <= dep_step < len(target.steps):
                out.append(_f(f"depends on tb {dep_tb} step {dep_step}, but that threadblock "
                              f"has {len(target.steps)} steps", r, tb.id, k))
            elif not target.steps[dep_step].has_dependents:
                out.append(_f(f"depends on tb {dep_tb} step {dep_step}, which does not publish "
                              "a flag (hasdep=0), so the wait is only released by a later step",
                              r, tb.id, k))
    if not has_reduce:
        return  # only reduce steps fuse
    for first, n in fused_reductions(tb):
        counts = {tb.steps[j].count for j in range(first, first + n)}
        if len(counts) > 1:
            out.append(_f(f"steps {first}..{first + n - 1} fuse into one multi-source reduction "
                          f"but have different counts {sorted(counts)}; the runtime applies "
                          "the last count to every source", r, tb.id, first))


def check_static(alg: ir.Algorithm,
                 limits: Callable[[ir.Algorithm], None] | None = None,
                 plan: Plan | None = None) -> list[Finding]:
    """Every static rule, then ``limits(alg)`` (a target's limit check, which raises
    :class:`LimitError` or :class:`XmlError`); an empty list means the structure is sound.
    ``plan``, ``alg``'s if the caller has it, only makes the step rules faster."""
    out = check_algorithm(alg)
    if out and any("ngpus" in f.message or "ids must be" in f.message for f in out):
        return out
    out += check_threadblocks(alg, plan)
    if limits is None:
        return out
    try:
        limits(alg)
    except LimitError as exc:
        out.append(Finding("limit", str(exc)))
    except XmlError as exc:
        out.append(Finding("limit", str(exc)))
    return out


def unused_flags(alg: ir.Algorithm) -> list[Finding]:
    """Steps that publish a flag nobody waits on (harmless; reported as warnings)."""
    waited = {(gpu.rank, d[0], d[1]) for gpu in alg.gpus for tb in gpu.threadblocks
              for st in tb.steps for d in st.depends}
    return [Finding("static", "publishes a flag (hasdep=1) that no step waits on",
                    gpu.rank, tb.id, k)
            for gpu in alg.gpus for tb in gpu.threadblocks for k, st in enumerate(tb.steps)
            if st.has_dependents and (gpu.rank, tb.id, k) not in waited]
