"""What a stalled rank of an MSCCL++ plan call waits on, one line per threadblock.

Both shm executors (native and Python) report through :func:`wait_report`,
from where each threadblock stopped and the counters, packet flags,
semaphores and barriers as they are, so a stall reads the same whichever
ran. The shm runtime puts each rank's lines under ``rank R: in call #N
...:``, as it does for MSCCL XML. A wait line names the channel, the peer
and the counts::

    threadblock 0 op 2 (wait) waits on memory channel 1 from rank 3 (signals arrived 0, taken 0;
    the plan signals it 3 times for 3 waits)

>>> _buffer_name("s")
'scratch'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from msccl_py.plan.mscclpp.memory import Machine, Step, expand
from msccl_py.plan.mscclpp.geometry import pipeline_iterations
from msccl_py.mscclpp_ir import Plan
from msccl_py.runtime.mscclpp.shm_program import ALIGN, PACKET_SOURCES, Layout

#: region(rank, byte offset, dtype, n) -> that rank's n elements at the offset in the arena
Region = Callable[[int, int, np.dtype, int], np.ndarray]


def _buffer_name(buf: str) -> str:
    return {"i": "input", "o": "output", "s": "scratch"}[buf]


def signal_counts(plan: Plan, lay: Layout) -> tuple[Counter, Counter]:
    """(signals the plan sends to each counter, waits on each) over one call."""
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


def _where(plan: Plan, lay: Layout, tb, st: Step) -> str:
    text = f"threadblock {tb.id} op {st.index} ({st.op.name})"
    if st.unit is not None:
        top = tb.ops[st.index]
        n = pipeline_iterations(top.num_chunks, lay.geo.chunk, top.unit_size)
        text += f" in pipeline iteration {st.offset // st.unit + 1}/{n}"
    return text


def wait_report(plan: Plan, lay: Layout, rank: int, steps: list[list[Step]],
                positions: list[int], region: Region, *, taken: np.ndarray, sems: np.ndarray,
                bars: np.ndarray, barrier_slots: dict[int, int]) -> str:
    """One line per unfinished threadblock of ``rank``: where it stopped and what it waits on.

    ``positions``: each threadblock's step index; ``taken``: signals each of
    this rank's counters gave its waits (by slot); ``sems``: semaphore
    values; ``bars``: per barrier slot, arrived count and generation.
    """
    counts = None
    shape = SimpleNamespace(plan=plan, geo=lay.geo, itemsize=lay.dtype.itemsize)
    lines = []
    for tb, tb_steps, pos in zip(plan.gpus[rank].threadblocks, steps, positions):
        if pos >= len(tb_steps):
            continue
        st = tb_steps[pos]
        op = st.op
        what = "is runnable"
        if op.name in ("wait", "rlxwait"):
            for c in op.channels:
                key = (rank, op.channel_type, c)
                owner, slot = lay.slots[key]
                got = int(region(owner, lay.counters[owner] + slot * ALIGN, np.dtype(np.int64), 1)[0])
                if got > taken[slot]:
                    continue
                counts = counts or signal_counts(plan, lay)
                peer = plan.gpus[rank].channel_peers(op.channel_type)[c]
                what = (f"waits on {op.channel_type} channel {c} from rank {peer} (signals arrived "
                        f"{got}, taken {int(taken[slot])}; the plan signals it {counts[0][key]} "
                        f"times for {counts[1][key]} waits)")
                break
        elif op.name == "barrier":
            arrived = int(bars[2 * barrier_slots[op.barrier_id]])
            what = (f"waits at barrier {op.barrier_id} for {op.num_threadblocks} threadblocks, "
                    f"{arrived} arrived")
        elif op.name == "sem_acquire":
            for s in op.semaphores:
                if sems[s] <= 0:
                    ops = [x.op.name for t in steps for x in t if s in x.op.semaphores]
                    what = (f"waits to acquire semaphore {s} (value {int(sems[s])}; the rank "
                            f"releases it {ops.count('sem_release')} times for "
                            f"{ops.count('sem_acquire')} acquires)")
                    break
        elif op.name in PACKET_SOURCES:
            for ref in op.src[PACKET_SOURCES[op.name]]:
                off, n = Machine.span(shape, st, ref, rank, op.src[0])
                flags = region(rank, lay.packets[rank][ref.buffer][1] + off, np.dtype(np.uint8), n)
                seen = int(np.count_nonzero(flags))
                if seen < n:
                    what = (f"waits for LL packets in {_buffer_name(ref.buffer)} chunks "
                            f"{ref.index}..{ref.index + ref.size - 1} ({seen} of {n} elements "
                            f"written)")
                    break
        lines.append(f"{_where(plan, lay, tb, st)} {what}")
    return "\n".join(lines) if lines else "all threadblocks finished"
