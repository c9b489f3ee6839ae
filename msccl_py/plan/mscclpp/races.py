"""The wording of a race the plan machine found: the two operations, and the missing order between them.

Beside the two operations, a finding names what the plan relied on where it
can tell (:mod:`msccl_py.plan.mscclpp.threads`): a signal or semaphore release that
runs on a block's first threads with no ``nop`` after an operation every
thread runs; a wait or acquire whose order no ``nop`` passes on to the
block's other threads; a semaphore acquire that passed on its initial value
before the release it pairs with. ``m`` is a :class:`msccl_py.plan.mscclpp.memory.Machine`.

>>> where((0, 1, 4, "put"))
'rank 0 threadblock 1 op 4 (put)'
"""

from __future__ import annotations

import bisect

_BUFFERS = {"i": "input", "o": "output", "s": "scratch"}
DEFAULT = "with no signal/wait, barrier or semaphore ordering them"


def where(w) -> str:
    rank, tb, index, name = w[:4]
    return f"rank {rank} threadblock {tb} op {index} ({name})"


def describe(m, ev: int | None, other: int, verb: str, base, element: int, end_clock=None,
             write: bool = False) -> str:
    """One ``race:`` line: event ``ev`` touches ``base[element]``, which event ``other`` ``verb`` (wrote
    or read) unordered. ``ev=None``: the accessor is the end of the owner's kernel, whose clock is
    ``end_clock``."""
    packets = base[0] == "p"
    buf = "scratch packets" if packets else _BUFFERS[base[1]]
    owner = base[1] if packets else base[0]
    first = where(m.ev_where[other])
    if ev is None:
        after = ("its caller then reads the output" if verb == "wrote"
                 else "its caller may then refill the buffer")
        line = (f"race: {first} {'writes' if verb == 'wrote' else 'reads'} rank {owner} {buf} element "
                f"{element} with nothing ordering it before rank {owner}'s kernel ends ({after})")
        return line + _writer_hint(m, other, end_clock)
    a, b = int(m.ev_tb[ev]), int(m.ev_tb[other])
    line = (f"race: {where(m.ev_where[ev])} {'writes' if write else 'reads'} rank {owner} {buf} element "
            f"{element} that {first} {verb}")
    if a == b:
        return line + (" with no nop or barrier between them (each of the block's threads runs its own "
                       "slices of both)")
    clocks = m.vis if verb == "wrote" else m.exe
    hint = _missing_barriers(m, ev, other, clocks) or _early_hint(m, ev, other)
    return line + (hint or " " + DEFAULT)


def _writer_sync(m, other: int, clock) -> int:
    """The first lead operation of the writer's block after ``other`` that ``clock`` has seen (-1: none)."""
    w = int(m.ev_tb[other])
    if w % 2:
        return -1
    log = m.lead_log[w // 2]
    k = bisect.bisect_right(log, int(m.ev_pos[other]), key=lambda entry: int(m.ev_pos[entry[1]]))
    return log[k][1] if k < len(log) and log[k][0] <= clock[w + 1] else -1


def _writer_hint(m, other: int, clock) -> str:
    """The other block signalled after ``other`` on its lead threads alone, and ``clock`` saw that."""
    sync = _writer_sync(m, other, clock)
    return "" if sync < 0 else "; " + _after(m, sync, other)


def _after(m, sync: int, other: int) -> str:
    return (f"{where(m.ev_where[sync])} orders them, but it runs on its block's first threads only and "
            f"no nop or barrier after op {m.ev_where[other][2]} ({m.ev_where[other][3]}), which every "
            f"thread runs, makes it wait for the whole block")


def _missing_barriers(m, ev: int, other: int, clocks) -> str:
    """What a ``nop`` would have ordered: after the other block's all-thread operation, before this one."""
    a = int(m.ev_tb[ev])
    lead = clocks[a + 1] if a % 2 == 0 else None
    sync = _writer_sync(m, other, clocks[a])
    if sync < 0 and lead is not None:
        sync = _writer_sync(m, other, lead)
    hints = [_after(m, sync, other)] if sync >= 0 else []
    last = m.last_lead[a // 2]
    if lead is not None and last >= 0:
        b = int(m.ev_tb[other])
        seen = lead[b] >= m.ev_clk[other] or (sync >= 0 and lead[b | 1] >= m.ev_clk[sync])
        if seen:
            hints.append(f"{where(m.ev_where[last])} orders them, but it runs on its block's first threads "
                         f"only and no nop or barrier passes that on before op {m.ev_where[ev][2]}, which "
                         f"every thread runs")
    return "; " + "; and ".join(hints) if hints else ""


def _early_hint(m, ev: int, other: int) -> str:
    """The accessor's block acquired a semaphore that the other block releases, on its initial value."""
    block, releaser = int(m.ev_tb[ev]) // 2, int(m.ev_tb[other]) // 2
    for sem, acquire, rel_block, _, release in m.early.get(block, ()):
        if rel_block == releaser:
            init = m.sem[(m.ev_where[acquire][0], sem)].init
            return (f": {where(m.ev_where[acquire])} passes on semaphore {sem}'s initial value {init} "
                    f"before the release it pairs with, {release}")
    return ""
