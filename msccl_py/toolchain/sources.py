"""What the toolchain compiles from a DSL program: its recording, and the log of its checks.

The DSL (:mod:`msccl_py.language`) records; this module only says what a
recording holds. Everything here is data the DSL hands over: the compiler's
:class:`~msccl_py.compiler.trace.Trace`, the declared collective, the
symbolic result the collective's ``check()`` judges, and a few facts the DSL
knows (where the program and the ``XML()`` call are, whether a ``Check()``
already passed on exactly this trace).

>>> from msccl_py.compiler.trace import Op, Trace
>>> t = Trace("p", "custom", 2, False, "Simple", 1, False, True, True, [1, 1], [1, 1],
...           [{}, {}], [Op("copy", 0, "i", 0, 1, "o", 0, 1)])
>>> rec = Recording(t, collective=None, subject=None, buffers=[], outputs=[[], []])
>>> rec.name, rec.log.passed
('p', None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from msccl_py import ir
from msccl_py.compiler.trace import Trace


@dataclass(eq=False)
class ProgramLog:
    """What the DSL's ``Check()`` calls on one program found, appended as they run.

    Captures keep the log of every program made under them, so a command
    sees a failed check even of a program that wrote no XML. ``program`` is
    the DSL's own object, handed back to callers that want it (opaque here).
    """

    name: str = ""
    program: Any = None
    #: each Check()'s outcome, in order
    results: list[bool] = field(default_factory=list)
    #: what the failing Check() calls reported, with their FILE:LINE
    report: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool | None:
        """False when any Check() failed; None when none ran."""
        return all(self.results) if self.results else None


def _same_slot(rank: int, buffer, index: int) -> tuple[Any, int]:
    return buffer, index


@dataclass(eq=False)
class Recording:
    """A DSL program as recorded: what lowering, judging and verifying it need.

    ``subject`` is what the collective's ``check(prog)`` is called with (the
    DSL's program object: msccl-tools' checks read ``prog.buffers`` and more);
    ``buffers`` its per-rank buffers (buffer -> list of symbolic values) and
    ``outputs`` each rank's output slots, whose values list the input chunks
    they hold (``value.chunks``, each with ``origin_rank``/``origin_index``).
    ``locate(rank, buffer, index)`` gives the trace's buffer key and index a
    slot is stored at (the collective's aliasing) and ``label(buffer)`` how
    messages spell a buffer. ``call`` is the ``(file, line)`` of the
    ``XML()`` call a refusal points at. ``lowered`` is ``(alg, base)`` when
    the DSL already lowered this trace (see :func:`msccl_py.toolchain.lower`).
    """

    trace: Trace
    collective: Any
    subject: Any
    buffers: list[dict]
    outputs: list[list]
    locate: Callable[[int, Any, int], tuple[Any, int]] = _same_slot
    label: Callable[[Any], str] = str
    log: ProgramLog = field(default_factory=ProgramLog)
    file: str | None = None
    line: int | None = None
    call: tuple[str | None, int | None] = (None, None)
    #: the program asked for msccl-tools' ``dependence_nop`` hoisting of reduce waits
    dependence_nop: bool = False
    #: a Check() passed on exactly this trace: no need to judge it again
    checked: bool = False
    #: an in-place collective whose input and output are separate lists on some rank
    apart_in_place: bool = False
    lowered: tuple[ir.Algorithm, ir.Algorithm | None] | None = None

    @property
    def name(self) -> str:
        return self.trace.name
