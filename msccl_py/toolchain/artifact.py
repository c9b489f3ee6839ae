"""What the toolchain returns, and the few choices a caller makes about how it runs.

>>> a = Artifact("ring", "msccl", notes=["note: ring: x"])
>>> a.notes
['note: ring: x']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from msccl_py import ir


@dataclass(frozen=True)
class Policy:
    """How a compile runs. Limits are always checked; the rest is the caller's choice.

    ``verify``: run the verifier before writing (the DSL's ``check_xml``); a
    program that deadlocks only with large messages then gets a ``maxBytes``
    that keeps the runtimes from selecting it there. ``force``: write a
    program whose result is not its declared collective's (a warning note)
    instead of refusing it. ``text``: write the target text (False: IR,
    verdict and notes only). ``gpus_per_node``: the node layout of an
    MSCCL++ plan (memory channels within a node, port channels between).
    """

    verify: bool = True
    force: bool = False
    text: bool = True
    gpus_per_node: int | None = None


@dataclass
class Artifact:
    """One compiled program for one target.

    ``algorithm`` is the IR as written (``root`` and a verified ``maxBytes``
    set; never the caller's object when those changed); ``text`` the target
    text (MSCCL XML, or an MSCCL++ plan's JSON; None when not asked for);
    ``verdict`` the verifier's (a :class:`~msccl_py.verify.Verdict`, or the
    plan verdict's summary line for MSCCL++; None when not verified, or when
    it was compared with a result judged wrong); ``judged`` whether the
    result was judged right for the declared collective (False: written
    anyway with ``force``, or nothing to judge by; None: not a program).
    ``notes`` are the lines to say on stderr, each with its ``note:`` or
    ``warning:`` prefix, in the order they arose. ``source`` is what was
    compiled (a :class:`~msccl_py.toolchain.sources.Recording` or an IR);
    ``plan`` the MSCCL++ plan object for that target. ``judgement`` is the
    :class:`~msccl_py.toolchain.judge.Judgement` this compile made (None when it
    judged nothing), so a ``Check()`` right after ``XML()`` need not judge again.
    ``lowered`` is a program's ``(IR, one-instance IR or None)`` as lowered, before
    ``root`` and ``maxBytes`` were set: what the DSL keeps so that compiling it again
    (for another target, say) lowers nothing.
    """

    name: str
    target: str
    algorithm: ir.Algorithm | None = None
    text: str | None = None
    verdict: Any = None
    judged: bool | None = None
    notes: list[str] = field(default_factory=list)
    source: Any = None
    plan: Any = None
    judgement: Any = None
    lowered: tuple[ir.Algorithm, ir.Algorithm | None] | None = None
