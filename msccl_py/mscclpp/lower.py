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

==========  ===============================================  ============================================
step        Simple                                           LL
==========  ===============================================  ============================================
``s``       put src → next; signal                           ppkt src → next
``r``       wait; copy slot → dst                            upkt slot → dst
``rcs``     wait; copy slot → dst; put slot → next; signal   upkt slot → dst; ppkt dst → next
``rrs``     wait; re [src, slot] → slot; put slot → next;    repkt [src, slot] → tmp; ppkt tmp → next
            signal
``rrc``     wait; re [src, slot] → dst                       repkt [src, slot] → dst
``rrcs``    wait; re [src, slot] → dst; put dst → next;      repkt [src, slot] → dst; ppkt dst → next
            signal
``cpy``     copy src → dst                                   copy src → dst
``re``      re [dst, src] → dst                              re [dst, src] → dst
==========  ===============================================  ============================================

Channels are memory channels between ranks of one node and port channels
between nodes (there ``put`` + ``signal`` is one ``pws``). Each direction of
each MSCCL connection gets its own channel, so exactly one threadblock on
each side uses it and a wait always pairs with the signal of its message.
Under LL the scratch slots hold packets and ``tmp`` is a data area placed
after them; the plan's protocol is ``LL`` for MSCCL's LL and LL128.

>>> from msccl_py.library import compile as compile_program
>>> plan = lower(compile_program("allreduce_ring", num_ranks=4, use_cache=False))
>>> plan.collective, plan.protocol, len(plan.gpus[0].memory_channels)
('allreduce', 'Simple', 2)
"""

from __future__ import annotations

import json
from collections import defaultdict

from msccl_py import ir
from msccl_py.errors import LoweringError, VerificationError
from msccl_py.mscclpp.ir import Gpu, Op, Plan, Ref, RemoteBuffer, Threadblock
from msccl_py.mscclpp.limits import MAX_DEVICE_SEMAPHORES, MAX_OPERATION, TOO_MANY_OPERATIONS
from msccl_py.mscclpp.read import read_plan_text
from msccl_py.mscclpp.verify import verify_plan
from msccl_py.mscclpp.write import plan_to_json

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
    msgs = _messages(alg)
    lw = _Lowering(alg, msgs, per_node, packets)
    collective, raw = COLLECTIVES[alg.collective]
    return Plan(name=alg.name, collective=collective, raw_collective=raw,
                protocol="LL" if packets else "Simple", inplace=alg.inplace, gpus=lw.gpus())


#: operations one MSCCL step becomes at most (wait, put or packet copy, signal, reduce)
OPS_PER_STEP = 4
#: MSCCL steps per threadblock that always fit the executor's operations
MAX_STEPS_PER_TB = MAX_OPERATION // OPS_PER_STEP


def longest_threadblock(alg: ir.Algorithm) -> int:
    """The most steps any threadblock of ``alg`` runs."""
    return max((len(tb.steps) for _, tb in alg.threadblocks()), default=0)


def emit(alg: ir.Algorithm, gpus_per_node: int | None = None) -> tuple[Plan, str, str]:
    """The plan of ``alg`` as JSON text, read back and verified, with the verdict's summary.

    Raises VerificationError when the verdict is not ok.

    Verifying the text read back (not the plan built in memory) checks
    exactly what the executor will load.
    """
    text = json.dumps(plan_to_json(lower(alg, gpus_per_node)), indent=1) + "\n"
    plan = read_plan_text(text)
    verdict = verify_plan(plan)
    if not verdict.ok:
        first = f"; {verdict.findings[0].strip()}" if verdict.findings else ""
        why = (" (a custom collective becomes a sendrecv plan: each rank's output must be another "
               "rank's whole input)" if alg.collective == "custom" and verdict.status == "incorrect" else "")
        if TOO_MANY_OPERATIONS in first:
            why = (f" (the algorithm has threadblocks of {longest_threadblock(alg)} steps, and a "
                   f"step becomes up to {OPS_PER_STEP} operations, so about {MAX_STEPS_PER_TB} "
                   f"steps fit in one: spread the steps over more threadblocks, e.g. with a "
                   f"library program's spread parameter such as channels or rings (more "
                   f"instances do not shorten a threadblock), or use fewer ranks)")
        raise VerificationError(f"{alg.name}: the MSCCL++ plan is {verdict.status}: {verdict.summary}"
                                f"{first}{why}; not written")
    return plan, text, verdict.summary


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
        return ops

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
        return ops

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
