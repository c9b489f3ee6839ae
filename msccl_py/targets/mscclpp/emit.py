"""Lower a compiled MSCCLang program (``ir.Algorithm``) to an MSCCL++ execution plan.

MSCCL is two-sided: a send step and the matching receive step meet in a
FIFO. MSCCL++ is one-sided, so every message becomes a write into a slot of
the receiver's scratch buffer that only this message uses, plus a
signal/wait pair (Simple) or LL packets whose flags carry the
synchronisation. The receiving step then does its local part from the
slot, at the point in its threadblock where MSCCL would have received, so
every local buffer is written exactly when MSCCL writes it and the program's
own dependencies still order it. Those dependencies (between threadblocks of
one rank) become device semaphores, one per (producer, consumer) pair of
threadblocks.

Per MSCCL step (``slot`` = the message's scratch slot on the receiver,
``next`` = the slot of the message this step sends):

==========  ======================================================  ==========================================
step        Simple                                                  LL
==========  ======================================================  ==========================================
``s``       put src → next; nop; signal                             ppkt src → next
``r``       wait; nop; copy slot → dst                              upkt slot → dst
``rcs``     wait; nop; res [slot] → [dst, next]; nop; signal        upkt slot → dst; nop; ppkt dst → next
``rrs``     wait; nop; res [src, slot] → [slot, next]; nop; signal  repkt [src, slot] → tmp; nop; ppkt tmp → next
``rrc``     wait; nop; re [src, slot] → dst                         repkt [src, slot] → dst
``rrcs``    wait; nop; res [src, slot] → [dst, next]; nop; signal   repkt [src, slot] → dst; nop; ppkt dst → next
``cpy``     copy src → dst                                          copy src → dst
``re``      re [dst, src] → dst                                     re [dst, src] → dst
==========  ======================================================  ==========================================

The ``nop``s are where the executor's threads need a block barrier
(:func:`with_barriers`, :mod:`msccl_py.plan.mscclpp.threads`): signals and waits
run on a block's first threads only, data operations on all of them.
Channels are memory channels between ranks of one node and port channels
between nodes (there ``put`` + ``signal`` is one ``pws``). Each direction of
each MSCCL connection gets its own channel, so exactly one threadblock on
each side uses it and a wait always pairs with the signal of its message.
Under LL the scratch slots hold packets and ``tmp`` is a data area placed
after them; the plan's protocol is ``LL`` for MSCCL's LL and LL128. A
threadblock past the executor's 64 operations is cut into segments, each a
threadblock that runs after the one before (:func:`_split`).

>>> from msccl_py.library import compile as compile_program
>>> plan = lower(compile_program("allreduce_ring", num_ranks=4, use_cache=False))
>>> plan.collective, plan.protocol, len(plan.gpus[0].memory_channels)
('allreduce', 'Simple', 2)
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict

from msccl_py import ir
from msccl_py.errors import LoweringError
from msccl_py.mscclpp_ir import Gpu, Op, Plan, Ref, RemoteBuffer, Threadblock
from msccl_py.targets.mscclpp.limits import MAX_DEVICE_SEMAPHORES, MAX_OPERATION
from msccl_py.plan.mscclpp.threads import ALL, LEAD, PUBLISHES, RECEIVES, SYNC, kind
from msccl_py.targets.mscclpp.write import plan_to_json

#: MSCCLang collective -> (plan IR name, JSON spelling) of the executor collective it becomes.
#: A custom collective becomes a sendrecv plan; the verifier then holds it to sendrecv's
#: postcondition (every rank's output is another rank's whole input), so others are refused.
COLLECTIVES = {"allreduce": ("allreduce", "allreduce"), "allgather": ("allgather", "allgather"),
               "reduce_scatter": ("reduce_scatter", "reducescatter"), "alltoall": ("alltoall", "alltoall"),
               "custom": ("sendrecv", "sendrecv")}


def lower(alg: ir.Algorithm, gpus_per_node: int | None = None) -> Plan:
    """The MSCCL++ plan computing what ``alg`` computes.

    ``gpus_per_node`` (default: all ranks on one node) decides which peers
    get memory channels and which port channels. Raises
    :class:`~msccl_py.errors.LoweringError` for a collective the executor
    does not run or a program whose sends and receives do not match.
    """
    if alg.collective not in COLLECTIVES:
        raise LoweringError(f"{alg.name}: collective {alg.collective!r} has no MSCCL++ executor "
                            f"counterpart (it runs allreduce, allgather, reducescatter, alltoall and sendrecv); "
                            f"compile it to XML instead")
    per_node = gpus_per_node or alg.ngpus
    if per_node < 1:
        raise LoweringError(f"gpus_per_node must be at least 1, not {per_node}")
    packets = alg.protocol in ("LL", "LL128")
    lw = _Lowering(alg, _messages(alg), per_node, packets)
    starts = lw.segments()
    if starts:
        alg = _split(alg, starts)
        lw = _Lowering(alg, _messages(alg), per_node, packets)
    collective, raw = COLLECTIVES[alg.collective]
    return Plan(name=alg.name, collective=collective, raw_collective=raw,
                protocol="LL" if packets else "Simple", inplace=alg.inplace, gpus=lw.gpus())


#: operations one MSCCL step becomes at most (wait, nop, reduce-and-put, nop, signal)
OPS_PER_STEP = 5
#: MSCCL steps per threadblock that always fit the executor's operations (longer threadblocks
#: are cut into segments that run one after another)
MAX_STEPS_PER_TB = MAX_OPERATION // OPS_PER_STEP


def longest_threadblock(alg: ir.Algorithm) -> int:
    """The most steps any threadblock of ``alg`` runs."""
    return max((len(tb.steps) for _, tb in alg.threadblocks()), default=0)


def emit_text(alg: ir.Algorithm, gpus_per_node: int | None = None) -> str:
    """The plan of ``alg`` as the JSON text the executor loads (verified by the caller:
    :func:`msccl_py.toolchain.mscclpp_plan.emit`)."""
    return json.dumps(plan_to_json(lower(alg, gpus_per_node)), indent=1) + "\n"


class _Message:
    """One MSCCL send matched with its receive: where it comes from, where it lands."""

    __slots__ = ("src", "dst", "ch", "count", "slot", "stage", "send_at", "recv_at")

    def __init__(self, src, dst, ch, count, send_at, recv_at):
        self.src, self.dst, self.ch, self.count = src, dst, ch, count
        self.send_at, self.recv_at = send_at, recv_at
        self.slot = self.stage = -1


def _messages(alg: ir.Algorithm) -> list[_Message]:
    """Every send-type step paired with the receive-type step that takes it (FIFO order per connection)."""
    sends, recvs = defaultdict(list), defaultdict(list)
    for gpu, tb in alg.threadblocks():
        for k, st in enumerate(tb.steps):
            if st.is_send:
                sends[(gpu.rank, tb.send_peer, tb.channel)].append((tb.id, k, st.count))
            if st.is_recv:
                recvs[(tb.recv_peer, gpu.rank, tb.channel)].append((tb.id, k, st.count))
    out = []
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, []), recvs.get(key, [])
        a, b, ch = key
        if len(s) != len(r):
            raise LoweringError(f"connection rank {a} -> rank {b} channel {ch}: {len(s)} sends but "
                                f"{len(r)} receives")
        for (stb, sk, sc), (rtb, rk, rc) in zip(s, r):
            if sc != rc:
                raise LoweringError(f"rank {a} threadblock {stb} step {sk} sends {sc} chunks to rank {b}, "
                                    f"whose threadblock {rtb} step {rk} receives {rc}")
            out.append(_Message(a, b, ch, sc, (stb, sk), (rtb, rk)))
    return out


class _Lowering:
    def __init__(self, alg: ir.Algorithm, msgs: list[_Message], per_node: int, packets: bool):
        self.alg, self.msgs, self.packets = alg, msgs, packets
        self.node = [r // per_node for r in range(alg.ngpus)]
        self.out_msg = {(m.src, m.send_at): m for m in msgs}
        self.in_msg = {(m.dst, m.recv_at): m for m in msgs}
        self._slots()
        self._channels()

    def _slots(self) -> None:
        # each message its own slot past the program's scratch. An LL packet at packet index p
        # covers scratch data elements 2p and 2p+1, so packet slots start at half the program's
        # scratch and the data area for reduce-and-forward results sits past all packets
        first = [g.scratch_chunks for g in self.alg.gpus]
        used = [-(-s // 2) for s in first] if self.packets else first[:]
        for m in self.msgs:
            m.slot = used[m.dst]
            used[m.dst] += m.count
        for m in self.msgs:
            # a port channel copies packets as they are, so LL data is packed into a local slot first
            if self.packets and self.node[m.src] != self.node[m.dst]:
                m.stage = used[m.src]
                used[m.src] += m.count
        self.tmp = {}
        if not self.packets:
            self.scratch = used
            return
        self.scratch = [2 * u for u in used]
        for gpu, tb in self.alg.threadblocks():
            for k, st in enumerate(tb.steps):
                if st.op == "recv_reduce_send":
                    self.tmp[(gpu.rank, tb.id, k)] = self.scratch[gpu.rank]
                    self.scratch[gpu.rank] += st.count

    def _channels(self) -> None:
        by_pair = defaultdict(list)
        for m in self.msgs:
            by_pair[(min(m.src, m.dst), max(m.src, m.dst))].append((m.src, m.dst, m.ch))
        n = self.alg.ngpus
        self.chans = [{"memory": [], "port": []} for _ in range(n)]
        self.chan_of = {}            # (rank, (src, dst, ch)) -> (type, rank-level id)
        self.remote = [[] for _ in range(n)]
        self.remote_of = {}          # (rank, peer) -> rank-level remote-buffer id
        for a, b in sorted(by_pair):
            ctype = "memory" if self.node[a] == self.node[b] else "port"
            for conn in sorted(set(by_pair[(a, b)])):
                for me, peer in ((a, b), (b, a)):
                    self.chan_of[(me, conn)] = (ctype, len(self.chans[me][ctype]))
                    self.chans[me][ctype].append(peer)
            for me, peer in ((a, b), (b, a)):
                self.remote_of[(me, peer)] = len(self.remote[me])
                self.remote[me].append(RemoteBuffer(peer, "s", (ctype,)))

    def gpus(self) -> list[Gpu]:
        out = []
        for g in self.alg.gpus:
            sems = _Semaphores(g)
            tbs = [Threadblock(tb.id, self._ops(g.rank, tb, sems)) for tb in g.threadblocks]
            out.append(Gpu(g.rank, g.input_chunks, g.output_chunks, self.scratch[g.rank],
                           memory_channels=tuple(self.chans[g.rank]["memory"]),
                           port_channels=tuple(self.chans[g.rank]["port"]),
                           remote_buffers=tuple(self.remote[g.rank]),
                           semaphores=tuple(0 for _ in range(sems.count)), threadblocks=tbs))
        return out

    def _ops(self, rank: int, tb: ir.Threadblock, sems: "_Semaphores") -> list[Op]:
        ops: list[Op] = []
        for k, st in enumerate(tb.steps):
            ops += _semaphore_ops("sem_acquire", sems.acquires(tb.id, k))
            ops += self._step(rank, tb, k, st)
            ops += _semaphore_ops("sem_release", sems.releases(tb.id, k))
        return with_barriers(ops)

    def segments(self) -> dict[tuple[int, int], list[int]]:
        """(rank, threadblock) -> first step of each segment, for threadblocks past the executor's
        operations: each segment becomes a threadblock of its own, run after the one before."""
        out = {}
        for g in self.alg.gpus:
            sems = _Semaphores(g)
            for tb in g.threadblocks:
                # a step's operations, a barrier before them, and a semaphore operation (with its
                # barrier) on either side
                cost = [len(with_barriers(self._step(g.rank, tb, k, st))) + 1
                        + 2 * bool(sems.acquires(tb.id, k)) + 2 * bool(sems.releases(tb.id, k))
                        for k, st in enumerate(tb.steps)]
                if sum(cost) <= MAX_OPERATION:
                    continue
                starts, used = [0], 0
                for k, c in enumerate(cost):
                    if used + c > MAX_OPERATION - 4 and used:     # 4: the chain's acquire and release
                        starts.append(k)
                        used = 0
                    used += c
                out[(g.rank, tb.id)] = starts
        return out

    def _step(self, rank: int, tb: ir.Threadblock, k: int, st: ir.Step) -> list[Op]:
        if st.op == "copy":
            return [Op("copy", src=(_local(rank, st.src, st.count),), dst=(_local(rank, st.dst, st.count),))]
        if st.op == "reduce":
            dst = _local(rank, st.dst, st.count)
            return [Op("re", src=(dst, _local(rank, st.src, st.count)), dst=(dst,))]
        ops: list[Op] = []
        value = _local(rank, st.src, st.count) if st.op == "send" else None
        if st.is_recv:
            ops, value = self._receive(rank, tb.id, k, st, self.in_msg[(rank, (tb.id, k))])
        if st.is_send:
            ops += self._send(rank, self.out_msg[(rank, (tb.id, k))], value)
        return self._fuse(ops) if st.is_recv and st.is_send and not self.packets else ops

    def _receive(self, rank: int, tb: int, k: int, st: ir.Step, m: _Message) -> tuple[list[Op], Ref]:
        """The receiving part of a step, and where its result (what it forwards) is then held as data."""
        slot = Ref("local", "s", m.slot, m.count, rank=rank)
        dst = _local(rank, st.dst, st.count) if st.dst is not None else None
        if st.op == "recv_reduce_send":      # the result is sent, not stored: keep it in scratch
            dst = slot if not self.packets else Ref("local", "s", self.tmp[(rank, tb, k)], st.count, rank=rank)
        if self.packets:                     # packet flags order the read after the peer's write
            if st.op in ("recv", "recv_copy_send"):
                return [Op("upkt", src=(slot,), dst=(dst,))], dst
            return [Op("repkt", src=(_local(rank, st.src, st.count), slot), dst=(dst,))], dst
        ctype, cid = self.chan_of[(rank, (m.src, m.dst, m.ch))]
        ops = [Op("wait", channel_type=ctype, channels=(cid,))]
        if st.op in ("recv", "recv_copy_send"):
            return ops + [Op("copy", src=(slot,), dst=(dst,))], slot
        return ops + [Op("re", src=(_local(rank, st.src, st.count), slot), dst=(dst,))], dst

    def _fuse(self, ops: list[Op]) -> list[Op]:
        """A local copy or reduction followed by a put of its result over a memory channel becomes one
        ``res`` (reduce, store locally, store remotely): one pass, and no barrier between the two."""
        if len(ops) < 3 or ops[-2].name != "put" or ops[-2].channel_type != "memory" \
                or ops[-3].name not in ("copy", "re"):
            return ops
        local, put = ops[-3], ops[-2]
        if put.src[0] not in (local.dst[0], local.src[-1] if local.name == "copy" else None):
            return ops
        res = Op("res", channel_type="memory", channels=(), src=local.src, dst=(local.dst[0], put.dst[0]))
        return ops[:-3] + [res, ops[-1]]

    def _send(self, rank: int, m: _Message, src: Ref) -> list[Op]:
        ctype, cid = self.chan_of[(rank, (m.src, m.dst, m.ch))]
        dst = Ref("remote", "s", m.slot, m.count, rank=m.dst, remote=self.remote_of[(rank, m.dst)])
        if self.packets and ctype == "port":
            stage = Ref("local", "s", m.stage, m.count, rank=rank)
            return [Op("cpkt", src=(src,), dst=(stage,)),
                    Op("ppkt", channel_type=ctype, channels=(cid,), src=(stage,), dst=(dst,))]
        if self.packets:
            return [Op("ppkt", channel_type=ctype, channels=(cid,), src=(src,), dst=(dst,))]
        if ctype == "port":
            return [Op("pws", channel_type=ctype, channels=(cid,), src=(src,), dst=(dst,))]
        return [Op("put", channel_type=ctype, channels=(cid,), src=(src,), dst=(dst,)),
                Op("signal", channel_type=ctype, channels=(cid,))]


#: operands held as LL packets (the others are data), for the operations the lowering emits
_PACKET_OPERANDS = {"upkt": ("src", 0), "repkt": ("src", 1), "ppkt": ("dst", 0), "cpkt": ("dst", 0)}


def _accesses(op: Op) -> list[tuple[tuple, int, int, bool]]:
    """(memory, first chunk, end chunk, written) for each operand; packets and data are apart."""
    side, first = _PACKET_OPERANDS.get(op.name, (None, 0))
    out = []
    for name, refs, written in (("src", op.src, False), ("dst", op.dst, True)):
        for j, r in enumerate(refs):
            space = "packets" if name == side and j >= first else "data"
            out.append(((r.rank, r.buffer, space), r.index, r.index + r.size, written))
    return out


def with_barriers(ops: list[Op]) -> list[Op]:
    """``ops`` with a ``nop`` wherever the executor's threads need one (see :mod:`~msccl_py.plan.mscclpp.threads`).

    A ``nop`` goes before an operation that tells another block or rank what
    this block did (signal, semaphore release, port put) when an all-thread
    operation ran since the last barrier; before an all-thread operation when
    a wait or semaphore acquire ran since the last barrier (only the first
    threads waited); and between two all-thread operations that touch the same
    memory, one of them writing (the block's threads each run their own slices).

    >>> ops = with_barriers([Op("wait"), Op("copy", src=(Ref("local", "s", 0, 1, 0),),
    ...                      dst=(Ref("local", "o", 0, 1, 0),)), Op("signal")])
    >>> [op.name for op in ops]
    ['wait', 'nop', 'copy', 'nop', 'signal']
    """
    out: list[Op] = []
    ran_all = received = False
    touched: list[tuple[tuple, int, int, bool]] = []
    for op in ops:
        k = kind(op)
        mine = _accesses(op) if k == ALL else []
        clash = any(key == key2 and lo < hi2 and lo2 < hi and (w or w2)
                    for key, lo, hi, w in mine for key2, lo2, hi2, w2 in touched)
        if (k == LEAD and op.name in PUBLISHES and ran_all) or (k == ALL and (received or clash)):
            out.append(Op("nop"))
            ran_all = received = False
            touched = []
        out.append(op)
        if k == SYNC:
            ran_all = received = False
            touched = []
        elif k == ALL:
            ran_all = True
            touched += mine
        elif op.name in RECEIVES:
            received = True
    return out


def _split(alg: ir.Algorithm, starts: dict[tuple[int, int], list[int]]) -> ir.Algorithm:
    """``alg`` with each threadblock in ``starts`` cut into segments at those steps.

    A later segment gets a new threadblock id (after all the rank's others),
    the same peers and channel, and a dependency of its first step on the last
    step of the segment before, so the segments still run one after another;
    every dependency on a moved step follows it.
    """
    alg = copy.deepcopy(alg)
    for g in alg.gpus:
        moved: dict[tuple[int, int], tuple[int, int]] = {}
        extra: list[ir.Threadblock] = []
        next_id = len(g.threadblocks)
        for tb in g.threadblocks:
            cuts = starts.get((g.rank, tb.id))
            if not cuts:
                continue
            bounds = cuts[1:] + [len(tb.steps)]
            prev = (tb.id, bounds[0] - 1)
            for lo, hi in zip(bounds, bounds[1:]):
                seg = ir.Threadblock(next_id, tb.send_peer, tb.recv_peer, tb.channel, tb.steps[lo:hi])
                for k in range(lo, hi):
                    moved[(tb.id, k)] = (next_id, k - lo)
                seg.steps[0].depends = seg.steps[0].depends + [prev]
                prev = (next_id, hi - lo - 1)
                extra.append(seg)
                next_id += 1
            del tb.steps[bounds[0]:]
        g.threadblocks += extra
        for tb in g.threadblocks:
            for st in tb.steps:
                st.depends = [moved.get(d, d) for d in st.depends]
    return alg


def _semaphore_ops(name: str, ids: tuple[int, ...]) -> list[Op]:
    """``name`` over ``ids``, split into operations of at most the executor's 16 semaphores each."""
    return [Op(name, semaphores=ids[i:i + MAX_DEVICE_SEMAPHORES])
            for i in range(0, len(ids), MAX_DEVICE_SEMAPHORES)]


def _local(rank: int, loc: ir.Loc, count: int) -> Ref:
    return Ref("local", loc.buffer, loc.offset, count, rank=rank)


class _Semaphores:
    """MSCCL's cross-threadblock dependencies on one rank as semaphores, one per (producer, consumer) pair.

    A consumer's dependencies on one producer are needed in increasing step
    order (a later one implies the earlier ones), so the i-th acquire on the
    pair's semaphore matches the producer's i-th release.
    """

    def __init__(self, gpu: ir.Gpu):
        self.ids: dict[tuple[int, int], int] = {}
        self.needed: dict[tuple[int, int], set[int]] = defaultdict(set)   # (consumer tb, step) -> sems
        self.released: dict[tuple[int, int], list[int]] = defaultdict(list)  # (producer tb, step) -> sems
        for tb in gpu.threadblocks:
            last: dict[int, int] = {}
            for k, st in enumerate(tb.steps):
                for ptb, pstep in st.depends:
                    if ptb == tb.id or pstep <= last.get(ptb, -1):
                        continue
                    last[ptb] = pstep
                    sem = self.ids.setdefault((ptb, tb.id), len(self.ids))
                    self.needed[(tb.id, k)].add(sem)
                    self.released[(ptb, pstep)].append(sem)

    @property
    def count(self) -> int:
        return len(self.ids)

    def acquires(self, tb: int, step: int) -> tuple[int, ...]:
        return tuple(sorted(self.needed.get((tb, step), ())))

    def releases(self, tb: int, step: int) -> tuple[int, ...]:
        return tuple(self.released.get((tb, step), ()))
