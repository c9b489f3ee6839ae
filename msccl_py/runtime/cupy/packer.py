"""Execution plan -> the interpreter's int32/u64 tables (layout in kernel/interp.h).

Shared by the CuPy backend and the host emulation, so both run exactly the
same tables. Packing folds consecutive ``re`` steps into one fused
multi-source reduction (the runtimes' rule: same src buffer and dst, same
count, no dependency on the continuation, no dependents before it, at most
16), and precomputes the flag value each step publishes so the device does
no step arithmetic. :func:`call_params` turns one call's geometry and the
placement's addresses into the parameter vector; :func:`deadlock_message`
decodes a watchdog record.

>>> from msccl_py.runtime.shm_fallback import broadcast_chain
>>> pk = pack(broadcast_chain(2))     # rank 0: copy, send; rank 1: recv (codes from 1)
>>> pk.blocks.shape, (pk.steps[:, 0] & 15).tolist()
((2, 8), [7, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.plan import tables as P
from msccl_py.plan.contract import admit
from msccl_py.plan.geometry import CallGeometry, Geometry, call_geometry, geometry
from msccl_py.runtime.cupy.kernel_source import OP_BASE
from msccl_py.runtime.shm_program import check_plan

# --- mirrors of kernel/interp.h ---------------------------------------------------------
(P_S, P_ITER_ELEMS, P_NITER, P_SLOT_ELEMS, P_SLICES, P_STEPS_PER_SLICE, P_MAX_COUNT, P_NBLOCKS,
 P_EPOCH, P_WATCHDOG, P_BLOCKS, P_STEPS, P_DEPS, P_REDS, P_BUFS, P_CONNS, P_FLAGS, P_ERR,
 P_NSLOTS, P_BLOCK_BASE, P_WAITS) = range(21)
NPARAMS = 21
W_KIND, W_STEP, W_ITER, W_TARGET, W_SEEN, W_WANTED, W_SLICE = range(7)
WAIT_WORDS = 8
#: plan op code -> kernel op code (interp.h numbers the IR's ops from 1; checked at build)
KERNEL_OP = np.arange(OP_BASE, OP_BASE + len(P.OP_NAMES), dtype=np.int32)
WAIT_DEP, WAIT_RECV, WAIT_SEND = 1, 2, 3
(ERR_ABORT, ERR_BLOCK, ERR_STEP, ERR_ITER, ERR_KIND, ERR_TARGET, ERR_SEEN, ERR_WANTED,
 ERR_SLICE) = range(9)
ERR_WORDS = 16
CONN_FIFO, CONN_TAIL, CONN_HEAD, CONN_SEND_STEP, CONN_RECV_STEP = range(5)
CONN_WORDS = 8
STEP_WORDS = BLOCK_WORDS = 8
NSLOTS = 8
MAX_FUSED = 16
#: u64 words of FIFO control per connection: tail, sendStep | head, recvStep on
#: separate 64-byte lines (tail/recvStep live with the receiver, head/sendStep
#: with the sender)
CTRL_WORDS = 16
CTRL_TAIL, CTRL_SEND_STEP, CTRL_HEAD, CTRL_RECV_STEP = 0, 4, 8, 12
EPOCH_LIMIT = 1 << 20


@dataclass
class Packed:
    """The interpreter's tables of one algorithm.

    ``step_rows[k]`` is the plan step row of packed step ``k`` (the first of
    a fused ``re`` group), for error messages.
    """

    alg_name: str
    plan: P.Plan
    blocks: np.ndarray
    steps: np.ndarray
    deps: np.ndarray
    reds: np.ndarray
    step_rows: np.ndarray

    @property
    def nblocks(self) -> int:
        return len(self.blocks)

    @property
    def nconns(self) -> int:
        return len(self.plan.conns)

    def rank_block_range(self, rank: int) -> tuple[int, int]:
        return int(self.plan.rank_blocks[rank]), int(self.plan.rank_blocks[rank + 1])


def _fusable(st: np.ndarray, first: int, prev: int, row: int) -> bool:
    a, p, b = st[first], st[prev], st[row]
    return (b[P.S_OP] == P.OP_REDUCE and b[P.S_NDEPS] == 0 and not p[P.S_HAS_DEP]
            and b[P.S_SRC_BUF] == a[P.S_SRC_BUF] and b[P.S_DST_BUF] == a[P.S_DST_BUF]
            and b[P.S_DST_OFF] == a[P.S_DST_OFF] and b[P.S_COUNT] == a[P.S_COUNT])


def pack(alg: ir.Algorithm) -> Packed:
    """Check ``alg`` (connections match, chunks in bounds, deps exist) and pack its tables.

    Raises :class:`~msccl_py.errors.MscclRuntimeError` naming rank,
    threadblock and step for a plan the kernel cannot run.
    """
    try:
        plan = P.plan_for(alg)
    except P.PlanError as exc:
        raise MscclRuntimeError(f"{alg.name}: {exc}") from exc
    admit(alg, plan)                # the contract's admission first, as every runtime
    plan = check_plan(alg)          # then what the shm runtime also relies on
    st = plan.steps
    out_steps: list[list[int]] = []
    rows: list[int] = []
    reds: list[int] = []
    deps = np.zeros((len(plan.deps), 2), dtype=np.int32)
    if len(plan.deps):
        deps[:, 0] = plan.deps[:, P.D_BLOCK]
        deps[:, 1] = plan.deps[:, P.D_INDEX]
    blocks = np.zeros((plan.nblocks, BLOCK_WORDS), dtype=np.int32)
    for b in range(plan.nblocks):
        brow = plan.blocks[b]
        begin, n = int(brow[P.B_STEP_BEGIN]), int(brow[P.B_NSTEPS])
        blocks[b, :5] = (brow[P.B_RANK], brow[P.B_TB], brow[P.B_CHAN], brow[P.B_SEND_CONN],
                         brow[P.B_RECV_CONN])
        blocks[b, 5] = len(out_steps)
        blocks[b, 7] = b
        k = begin
        while k < begin + n:
            s = st[k]
            op = int(s[P.S_OP])
            last = k
            if op == P.OP_REDUCE:
                while (last + 1 < begin + n and last + 1 - k < MAX_FUSED
                       and _fusable(st, k, last, last + 1)):
                    last += 1
            local_src, local_dst = P.LOCAL_SRC[op], P.LOCAL_DST[op]
            sbuf = int(s[P.S_SRC_BUF]) if local_src else int(s[P.S_DST_BUF])
            soff = int(s[P.S_SRC_OFF]) if local_src else 0
            dbuf = int(s[P.S_DST_BUF]) if local_dst else sbuf
            doff = int(s[P.S_DST_OFF]) if local_dst else 0
            nred = last - k + 1 if op == P.OP_REDUCE else 0
            red_begin = len(reds)
            if op == P.OP_REDUCE:
                reds.extend(int(v) for v in st[k:last + 1, P.S_SRC_OFF])
            publish = int(st[last, P.S_INDEX]) if st[last, P.S_HAS_DEP] else -1
            w0 = int(KERNEL_OP[op]) | (sbuf << 4) | (dbuf << 6) | (nred << 8)
            out_steps.append([w0, soff, doff, int(s[P.S_COUNT]), int(s[P.S_DEP_BEGIN]),
                              int(s[P.S_NDEPS]), publish, red_begin])
            rows.append(k)
            k = last + 1
        blocks[b, 6] = len(out_steps) - blocks[b, 5]
    steps = np.array(out_steps, dtype=np.int32).reshape(len(out_steps), STEP_WORDS)
    return Packed(alg.name, plan, blocks, steps, deps,
                  np.array(reds if reds else [0], dtype=np.int32), np.array(rows, dtype=np.int64))


@dataclass(frozen=True)
class CallShape:
    """One call's geometry as the kernel needs it."""

    geometry: Geometry
    call: CallGeometry
    itemsize: int

    @property
    def slot_elems(self) -> int:
        return self.geometry.slot_data_bytes // self.itemsize

    @property
    def slices(self) -> int:
        return 2 if self.geometry.slots_per_transfer == 4 else 1

    @property
    def steps_per_slice(self) -> int:
        return self.geometry.slots_per_transfer // self.slices

    @property
    def fifo_bytes(self) -> int:
        """Bytes of FIFO data per connection (8 slots)."""
        return NSLOTS * self.geometry.slot_data_bytes


def call_shape(protocol: str, nchunksperloop: int, chunk_elems: int, itemsize: int,
               buffsize: int | None = None, iter_elems: int | None = None) -> CallShape:
    """Geometry of one call, checked so that every transfer fits its FIFO slots.

    >>> call_shape("Simple", 8, 1 << 20, 4).call.iterations
    2
    """
    g = geometry(protocol, buffsize)
    cg = call_geometry(protocol, nchunksperloop, chunk_elems, itemsize, buffsize, iter_elems)
    shape = CallShape(g, cg, itemsize)
    if shape.slot_elems < 1:
        raise MscclRuntimeError(f"{protocol} slots of {g.slot_data_bytes} B cannot hold one "
                                f"{itemsize}-byte element")
    capacity = shape.slot_elems * g.slots_per_transfer
    if cg.iter_elems > capacity:
        raise MscclRuntimeError(f"slice of {cg.iter_elems} elements does not fit a transfer of "
                                f"{g.slots_per_transfer} slots x {shape.slot_elems} elements")
    return shape


#: the device tables whose addresses a launch passes (``call_params``' ``addrs``)
TABLES = ("blocks", "steps", "deps", "reds", "bufs", "conns", "flags", "err", "waits")


def device_addrs(tables) -> dict[str, int]:
    """Table name -> device address of ``tables``' CuPy arrays of those names."""
    return {name: getattr(tables, name).data.ptr for name in TABLES}


def call_params(pk: Packed, shape: CallShape, epoch: int, watchdog_s: float,
                addrs: dict[str, int], nblocks: int, block_base: int = 0) -> np.ndarray:
    """The int64 parameter vector P of one launch (``addrs``: table name -> address)."""
    p = np.zeros(NPARAMS, dtype=np.int64)
    cg = shape.call
    p[P_S] = cg.chunk_elems
    p[P_ITER_ELEMS] = cg.iter_elems
    p[P_NITER] = cg.iterations
    p[P_SLOT_ELEMS] = shape.slot_elems
    p[P_SLICES] = shape.slices
    p[P_STEPS_PER_SLICE] = shape.steps_per_slice
    p[P_MAX_COUNT] = cg.max_allowed_count
    p[P_NBLOCKS] = nblocks
    p[P_EPOCH] = epoch
    p[P_WATCHDOG] = int(watchdog_s * 1e9)
    for key, idx in (("blocks", P_BLOCKS), ("steps", P_STEPS), ("deps", P_DEPS),
                     ("reds", P_REDS), ("bufs", P_BUFS), ("conns", P_CONNS), ("flags", P_FLAGS),
                     ("err", P_ERR), ("waits", P_WAITS)):
        p[idx] = addrs[key]
    p[P_NSLOTS] = NSLOTS
    p[P_BLOCK_BASE] = block_base
    return p


def conn_table(pk: Packed, fifo: list[int], recv_ctrl: list[int],
               send_ctrl: list[int]) -> np.ndarray:
    """conns[C][CONN_WORDS] from per-connection addresses.

    ``fifo[c]`` is the FIFO data, ``recv_ctrl[c]`` the control block holding
    tail and recvStep (receiver's memory), ``send_ctrl[c]`` the one holding
    head and sendStep (sender's memory); they may be the same block.
    """
    t = np.zeros((pk.nconns, CONN_WORDS), dtype=np.uint64)
    for c in range(pk.nconns):
        t[c, CONN_FIFO] = fifo[c]
        t[c, CONN_TAIL] = recv_ctrl[c] + 8 * CTRL_TAIL
        t[c, CONN_RECV_STEP] = recv_ctrl[c] + 8 * CTRL_RECV_STEP
        t[c, CONN_HEAD] = send_ctrl[c] + 8 * CTRL_HEAD
        t[c, CONN_SEND_STEP] = send_ctrl[c] + 8 * CTRL_SEND_STEP
    return t


def _flag_text(v: int, epoch: int) -> str:
    e, it, s = v >> 44, (v >> 16) & ((1 << 28) - 1), v & 0xFFFF
    if e != epoch:
        return "nothing published yet in this call"
    return f"published iteration {it} step {s}"


def _describe_wait(pk: Packed, b: int, step: int, it: int, kind: int, target: int, seen: int,
                   wanted: int, slice_: int, epoch: int, shape: CallShape) -> str:
    plan = pk.plan
    row = int(pk.step_rows[int(pk.blocks[b, 5]) + step])
    s = plan.steps[row]
    rank, tb = int(pk.blocks[b, 0]), int(pk.blocks[b, 1])
    where = (f"rank {rank} threadblock {tb} step {int(s[P.S_XML_S])} "
             f"({ir.OP_CODES[P.OP_NAMES[int(s[P.S_OP])]]}) in iteration {it} "
             f"of {shape.call.iterations}")
    if kind == WAIT_DEP:
        tr, ttb = int(pk.blocks[target, 0]), int(pk.blocks[target, 1])
        return (f"{where} waited on threadblock {ttb} of rank {tr} to finish its step "
                f"{wanted & 0xFFFF} (it has {_flag_text(seen, epoch)})")
    if kind == WAIT_RECV:
        c = int(pk.blocks[b, 4])
        peer, chan = int(plan.conns[c, P.C_SENDER]), int(plan.conns[c, P.C_CHAN])
        return (f"{where} waited for data from rank {peer} on channel {chan} (slice {slice_} "
                f"of the transfer; the FIFO tail is at slot step {seen}, needs {wanted})")
    c = int(pk.blocks[b, 3])
    peer, chan = int(plan.conns[c, P.C_RECEIVER]), int(plan.conns[c, P.C_CHAN])
    return (f"{where} waited for FIFO room to send to rank {peer} on channel {chan} (all "
            f"{NSLOTS} slots full: the receiver has released up to slot step {seen}, "
            f"needs {wanted})")


#: other blocks' waits listed after the first one's
MAX_LISTED = 8


def deadlock_message(pk: Packed, err: np.ndarray, epoch: int, watchdog_s: float,
                     shape: CallShape, waits: np.ndarray | None = None,
                     block_base: int = 0) -> str:
    """Human text of a watchdog record: who waited first, on what, and who else waited.

    ``waits`` ([blocks][WAIT_WORDS] of one launch starting at ``block_base``)
    adds every other stuck block, FIFO waits first: those are usually the
    cycle, the dependency waits follow from them.
    """
    b = int(err[ERR_BLOCK])
    first = _describe_wait(pk, b, int(err[ERR_STEP]), int(err[ERR_ITER]), int(err[ERR_KIND]),
                           int(err[ERR_TARGET]), int(err[ERR_SEEN]), int(err[ERR_WANTED]),
                           int(err[ERR_SLICE]), epoch, shape)
    text = f"{pk.alg_name}: deadlock: no progress for {watchdog_s:g} s: {first}"
    if waits is None:
        return text
    others = []
    for i in np.flatnonzero(waits[:, W_KIND]):
        blk = block_base + int(i)
        if blk == b:
            continue
        w = waits[i]
        others.append((int(w[W_KIND]) == WAIT_DEP, _describe_wait(
            pk, blk, int(w[W_STEP]), int(w[W_ITER]), int(w[W_KIND]), int(w[W_TARGET]),
            int(w[W_SEEN]), int(w[W_WANTED]), int(w[W_SLICE]), epoch, shape)))
    others.sort(key=lambda o: o[0])
    if others:
        listed = "; ".join(o[1] for o in others[:MAX_LISTED])
        more = f" (and {len(others) - MAX_LISTED} more)" if len(others) > MAX_LISTED else ""
        text += f". Also stuck: {listed}{more}"
    return text


def raise_if_aborted(pk: Packed, err: np.ndarray, epoch: int, watchdog_s: float,
                     shape: CallShape, waits: np.ndarray | None = None,
                     block_base: int = 0) -> None:
    """Raise MscclDeadlockError when the watchdog record says the call aborted."""
    if int(err[ERR_ABORT]) == 0:
        return
    if int(err[ERR_ABORT]) != 2:
        raise MscclRuntimeError(f"{pk.alg_name}: the interpreter aborted before it started "
                                "every block")
    raise MscclDeadlockError(deadlock_message(pk, err, epoch, watchdog_s, shape, waits,
                                              block_base))
