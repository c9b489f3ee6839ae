"""Judge a recorded program's symbolic result against its declared collective.

The collective's own ``check(prog)`` decides (built-in collectives and
custom ones alike). It runs on a view of the recorded buffers that logs
every slot read, so the slot read just before the check reports its first
problem is the first wrong chunk; the last recorded operation that wrote
that slot gives the FILE:LINE. :func:`postcondition` turns the same result
into what the verifier checks the lowered program against.

>>> from msccl_py.language import MSCCLProgram, Buffer, chunk
>>> from msccl_py.language.collectives import AllGather
>>> with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
...     _ = chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0).copy(1)
>>> j = judge(prog.recording())
>>> j.ok, j.slot
(False, (0, 'output', 1))
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from operator import attrgetter

from msccl_py.errors import ProgramError
from msccl_py.toolchain.sources import Recording


@dataclass
class Judgement:
    """Outcome of the collective's check on a program's result.

    ``lines`` is what ``check`` reported; ``slot`` the first wrong slot as
    ``(rank, buffer label, index)`` (None when it cannot be told); ``writer``
    the FILE:LINE and description of the DSL call that last wrote it (None:
    never written).
    """

    ok: bool | None  # None: the collective has no check() to judge by
    lines: list[str] = field(default_factory=list)
    slot: tuple[int, str, int] | None = None
    writer: str | None = None

    def first_problem(self) -> str:
        """One line: the first wrong chunk and where the program last wrote it."""
        head = self.lines[0] if self.lines else "the collective's check() returned False"
        head = head.removeprefix("Check: ")
        return head if self.slot is None else f"{head}; {self.where()}"

    def where(self) -> str:
        """Where the first wrong slot was last written, or that it never was."""
        if self.slot is None:
            return "the wrong chunk could not be told from check()'s report"
        r, buf, i = self.slot
        if self.writer:
            return f"rank {r} {buf}[{i}] was last written at {self.writer}"
        return f"rank {r} {buf}[{i}] was never written by the program"


class _LastRead:
    """The last slot a check read, as ``(rank, buffer, index)`` (None: none yet)."""

    __slots__ = ("slot",)

    def __init__(self):
        self.slot = None


class _Watched:
    """A buffer whose reads are noted in ``log`` (the last one only: that is what tells)."""

    __slots__ = ("store", "rank", "buffer", "log")

    def __init__(self, store, rank, buffer, log):
        self.store, self.rank, self.buffer, self.log = store, rank, buffer, log

    def __getitem__(self, i):
        if isinstance(i, int):
            self.log.slot = (self.rank, self.buffer, i if i >= 0 else len(self.store) + i)
        elif isinstance(i, slice):
            start = i.indices(len(self.store))[0]
            self.log.slot = (self.rank, self.buffer, start)
        return self.store[i]

    def __len__(self):
        return len(self.store)

    def __iter__(self):
        for i in range(len(self.store)):
            yield self[i]

    def __eq__(self, other):
        return list(self.store) == list(getattr(other, "store", other))

    __hash__ = None


class _WatchedSubject:
    """Stands in for the program inside ``check``: logged buffers, everything else delegated.

    ``unwatched_buffers`` are the recorded buffers themselves, for checks that
    read many slots and re-read the telling ones through ``buffers``
    (:meth:`msccl_py.language.collectives.Collective._expect`).
    """

    def __init__(self, subject, buffers, log):
        self._subject = subject
        self.unwatched_buffers = buffers
        self.buffers = [{key: _Watched(store, r, key, log) for key, store in bufs.items()}
                        for r, bufs in enumerate(buffers)]

    def __getattr__(self, name):
        return getattr(self._subject, name)


class _Tap(io.StringIO):
    """Collects ``check``'s printed text; remembers the slot read before its first line."""

    def __init__(self, log):
        super().__init__()
        self.log = log
        self.first_slot = None
        self.seen = False

    def write(self, s):
        if not self.seen and s.strip():
            self.seen = True
            self.first_slot = self.log.slot
        return super().write(s)


def judge(rec: Recording) -> Judgement:
    """Run the collective's ``check`` on ``rec``'s result, locating the first wrong chunk.

    A collective without ``check`` (it raises NotImplementedError) gives
    ``ok=None``; one whose ``check`` fails with another exception raises
    :class:`ProgramError`.
    """
    log = _LastRead()
    tap = _Tap(log)
    try:
        with contextlib.redirect_stdout(tap), contextlib.redirect_stderr(tap):
            ok = bool(rec.collective.check(_WatchedSubject(rec.subject, rec.buffers, log)))
    except NotImplementedError:
        return Judgement(None)
    except Exception as exc:
        raise ProgramError(f"{rec.name}: {type(rec.collective).__name__}.check() raised "
                           f"{type(exc).__name__}: {exc}", rec.file, rec.line) from exc
    lines = [ln.strip() for ln in tap.getvalue().splitlines() if ln.strip()]
    if ok:
        return Judgement(True, lines)
    slot = tap.first_slot if tap.seen else log.slot
    if slot is None:
        return Judgement(False, lines)
    rank, buffer, index = slot
    return Judgement(False, lines, (rank, rec.label(buffer), index),
                     _last_writer(rec, rank, buffer, index))


def _last_writer(rec: Recording, rank: int, buffer, index: int) -> str | None:
    """FILE:LINE and description of the last recorded operation writing the slot."""
    key, idx = rec.locate(rank, buffer, index)
    for op in reversed(rec.trace.ops):
        if op.dst_rank == rank and op.dst_buf == key and op.dst_idx <= idx < op.dst_idx + op.size:
            return f"{op.where} ({op.describe()})"
    return None


#: wrong slots listed after the error line; the rest are counted
SHOWN_PROBLEMS = 8


def failure_message(rec: Recording, j: Judgement) -> tuple[str, list[str]]:
    """The one-line error for a program whose result is not its collective's, and the
    lines that follow it: the other problems, and what to do."""
    details = [line.removeprefix("Check: ") for line in j.lines[1:1 + SHOWN_PROBLEMS]]
    more = len(j.lines) - 1 - len(details)
    if more > 0:
        details.append(f"... and {more} more wrong chunk{'s' if more != 1 else ''}")
    details.append("if the program computes a different collective, declare that one (a "
                   "Collective subclass whose check() describes the result)")
    return (f"{rec.name}: wrong result for collective {rec.collective.name}: "
            f"{j.first_problem()}"), details


def postcondition(rec: Recording, instances: int | None = None) -> dict:
    """What the compiled program must leave in each output chunk, from the recorded result.

    ``{(rank, "o", chunk): ((origin rank, origin chunk), ...)}`` in XML chunk
    numbering (instances replicate every chunk), for every output slot the
    program filled. ``instances`` overrides the program's own count (1: the
    base program).
    """
    trace = rec.trace
    inst = trace.instances if instances is None else instances
    interleaved = trace.interleaved
    out: dict = {}
    # a value copied to many slots is one object: slots holding it share one tuple
    # per instance (an allreduce has n^2 slots but n values)
    shared: dict = {}
    for r, slots in enumerate(rec.outputs):
        b_out = len(slots)
        for o, value in enumerate(slots):
            if value is None:
                continue
            lists = shared.get(id(value))
            if lists is None:
                parts = list(map(_ORIGIN, value.chunks))
                if inst == 1:  # the base program's: chunk numbers as recorded
                    lists = (tuple(parts),)
                elif interleaved:
                    lists = [tuple((q, k * inst + i) for q, k in parts) for i in range(inst)]
                else:
                    lists = [tuple((q, k + i * trace.input_sizes[q]) for q, k in parts)
                             for i in range(inst)]
                shared[id(value)] = lists
            if inst == 1:
                out[(r, "o", o)] = lists[0]
                continue
            for i in range(inst):
                if interleaved:
                    out[(r, "o", o * inst + i)] = lists[i]
                else:
                    out[(r, "o", o + i * b_out)] = lists[i]
    return out


#: a chunk's origin, taken in C
_ORIGIN = attrgetter("origin_rank", "origin_index")
