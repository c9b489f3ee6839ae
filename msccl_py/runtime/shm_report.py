"""What a stalled rank waits on, one line per unfinished threadblock: MSCCL XML and MSCCL++.

Both shm runtimes (XML programs and MSCCL++ plans) and both of their
executors (native and Python) report a stall through this module, from
where each threadblock stopped and the shared words as they are, so a stall
reads the same whichever ran. :func:`stalled` is the report's one frame
(skip finished threadblocks, ``<where> <what>`` per line, ``is runnable``
when nothing blocks it, ``all threadblocks finished`` when none is left);
:func:`xml_wait_report` and :func:`plan_wait_report` say what each kind of
program waits on. The shm runtime puts each rank's lines under ``rank R: in
call #N ...:``. A plan's wait line names the channel, the peer and the counts::

    threadblock 0 op 2 (wait) waits on memory channel 1 from rank 3 (signals arrived 0, taken 0;
    the plan signals it 3 times for 3 waits)

>>> print(stalled([("tb 0", None), None, ("tb 2", "waits")]))
tb 0 is runnable
tb 2 waits
>>> barrier_wait([3, 1])
'waits in barrier for ranks 1, 3'
>>> _buffer_name("s")
'scratch'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from msccl_py.plan.tables import OP_NAMES
from msccl_py.runtime.shm_control import ControlWords
from msccl_py.runtime.shm_threadblocks import (W_DEP, W_ENTER_RECV, W_ENTER_SEND, W_RECV, W_SEND,
                                               CallTemplate)

if TYPE_CHECKING:   # the plan side is imported when a plan call stalls, not by XML ranks
    from msccl_py.mscclpp_ir import Plan
    from msccl_py.plan.mscclpp.memory import Step
    from msccl_py.runtime.mscclpp.shm_program import Layout

#: region(rank, byte offset, dtype, n) -> that rank's n elements at the offset in the arena
Region = Callable[[int, int, np.dtype, int], np.ndarray]


def stalled(threadblocks: Iterable[tuple[str, str | None] | None]) -> str:
    """The report from each threadblock's ``(where, what)`` (None: it finished; ``what`` None:
    nothing blocks it)."""
    lines = [f"{where} {what or 'is runnable'}" for where, what in filter(None, threadblocks)]
    return "\n".join(lines) if lines else "all threadblocks finished"


def barrier_wait(missing: Iterable[int]) -> str:
    """The report of a rank stopped in the barrier that starts a call."""
    return "waits in barrier for ranks " + ", ".join(str(p) for p in sorted(missing))


def xml_wait_report(call: CallTemplate | None, seq: int, control: ControlWords) -> str:
    """What each unfinished threadblock of XML call ``call`` (number ``seq``) waits on."""
    tbs = call.tbs if call is not None else []
    niter = call.iterations if call is not None else 0
    return stalled(_xml_wait(st, tbs, niter, seq, control) for st in tbs)


def _xml_wait(st, tbs, niter: int, seq: int, control: ControlWords) -> tuple[str, str | None] | None:
    if st.it >= niter:
        return None
    tb = st.prog
    w = control.words
    step = tb.steps[st.si]
    where = (f"tb {tb.id} (channel {tb.channel}, send {tb.send_peer}, recv {tb.recv_peer}) "
             f"iteration {st.it + 1}/{niter} step {st.si} ({OP_NAMES[step.op]}, "
             f"count {step.count})")
    kind = st.wait
    if kind == W_DEP:
        dt, ds = st.wdep
        return where, f"waits for tb {tbs[dt].prog.id} to finish step {ds} of iteration {st.it + 1}"
    if kind in (W_ENTER_RECV, W_ENTER_SEND):
        peer = st.rpeer if kind == W_ENTER_RECV else st.speer
        return where, (f"waits for rank {peer} to enter call #{seq} (it is at call "
                       f"#{control.seq(peer)})")
    if kind == W_RECV:
        return where, (f"waits for data from rank {st.rpeer} on channel {tb.channel} "
                       f"(transfers consumed {st.rhead}, posted by the sender {w[st.rtail_w]})")
    if kind == W_SEND:
        return where, (f"waits for FIFO space towards rank {st.speer} on channel {tb.channel} "
                       f"(posted {st.stail}, receiver consumed {w[st.shead_w]})")
    return where, None


def _buffer_name(buf: str) -> str:
    return {"i": "input", "o": "output", "s": "scratch"}[buf]


def signal_counts(plan: Plan, lay: Layout) -> tuple[Counter, Counter]:
    """(signals the plan sends to each counter, waits on each) over one call."""
    from msccl_py.plan.mscclpp.memory import expand
    sent, waited = Counter(), Counter()
    for g in plan.gpus:
        for tb in g.threadblocks:
            for st in expand(plan, lay.geo.chunk, tb.ops):
                op = st.op
                if op.name in ("signal", "rlxsignal", "pws", "pwsf"):
                    ctype = "port" if op.name in ("pws", "pwsf") else op.channel_type
                    for c in op.channels:
                        sent[lay.pair[(g.rank, ctype, c)]] += 1
                elif op.name in ("wait", "rlxwait"):
                    for c in op.channels:
                        waited[(g.rank, op.channel_type, c)] += 1
    return sent, waited


def _where(lay: Layout, tb, st: Step) -> str:
    from msccl_py.plan.mscclpp.geometry import pipeline_iterations
    text = f"threadblock {tb.id} op {st.index} ({st.op.name})"
    if st.unit is not None:
        top = tb.ops[st.index]
        n = pipeline_iterations(top.num_chunks, lay.geo.chunk, top.unit_size)
        text += f" in pipeline iteration {st.offset // st.unit + 1}/{n}"
    return text


def plan_wait_report(plan: Plan, lay: Layout, rank: int, steps: list[list[Step]],
                     positions: list[int], region: Region, *, taken: np.ndarray,
                     sems: np.ndarray, bars: np.ndarray, barrier_slots: dict[int, int]) -> str:
    """One line per unfinished threadblock of ``rank`` of an MSCCL++ plan call: where it
    stopped and what it waits on.

    ``positions``: each threadblock's step index; ``taken``: signals each of
    this rank's counters gave its waits (by slot); ``sems``: semaphore
    values; ``bars``: per barrier slot, arrived count and generation.
    """
    from msccl_py.plan.mscclpp.memory import Machine
    from msccl_py.runtime.mscclpp.shm_program import ALIGN, PACKET_SOURCES
    counts: list = []               # signal_counts, worked out for the first wait seen
    shape = SimpleNamespace(plan=plan, geo=lay.geo, itemsize=lay.dtype.itemsize)

    def what(st: Step) -> str | None:
        op = st.op
        if op.name in ("wait", "rlxwait"):
            for c in op.channels:
                key = (rank, op.channel_type, c)
                owner, slot = lay.slots[key]
                got = int(region(owner, lay.counters[owner] + slot * ALIGN, np.dtype(np.int64),
                                 1)[0])
                if got > taken[slot]:
                    continue
                counts[:] = counts or signal_counts(plan, lay)
                peer = plan.gpus[rank].channel_peers(op.channel_type)[c]
                return (f"waits on {op.channel_type} channel {c} from rank {peer} (signals "
                        f"arrived {got}, taken {int(taken[slot])}; the plan signals it "
                        f"{counts[0][key]} times for {counts[1][key]} waits)")
        elif op.name == "barrier":
            arrived = int(bars[2 * barrier_slots[op.barrier_id]])
            return (f"waits at barrier {op.barrier_id} for {op.num_threadblocks} threadblocks, "
                    f"{arrived} arrived")
        elif op.name == "sem_acquire":
            for s in op.semaphores:
                if sems[s] <= 0:
                    ops = [x.op.name for t in steps for x in t if s in x.op.semaphores]
                    return (f"waits to acquire semaphore {s} (value {int(sems[s])}; the rank "
                            f"releases it {ops.count('sem_release')} times for "
                            f"{ops.count('sem_acquire')} acquires)")
        elif op.name in PACKET_SOURCES:
            for ref in op.src[PACKET_SOURCES[op.name]]:
                off, n = Machine.span(shape, st, ref, rank, op.src[0])
                flags = region(rank, lay.packets[rank][ref.buffer][1] + off, np.dtype(np.uint8),
                               n)
                seen = int(np.count_nonzero(flags))
                if seen < n:
                    return (f"waits for LL packets in {_buffer_name(ref.buffer)} chunks "
                            f"{ref.index}..{ref.index + ref.size - 1} ({seen} of {n} elements "
                            f"written)")
        return None

    return stalled(None if pos >= len(tb_steps)
                   else (_where(lay, tb, tb_steps[pos]), what(tb_steps[pos]))
                   for tb, tb_steps, pos in zip(plan.gpus[rank].threadblocks, steps, positions))
