"""Where ``XML()`` sends a program: the command's capture, or stdout.

The toolchain compiles; this module hands it the program. Under a command
(:func:`msccl_py.toolchain.capture`) the innermost capture compiles and keeps
the artifact; in a plain run the program is compiled here, its notes said on
stderr and its XML written to stdout, as msccl-tools' ``XML()`` prints it.

>>> from msccl_py.language import MSCCLProgram, Buffer, chunk
>>> from msccl_py.language.collectives import AllGather
>>> made = []
>>> with capture(lambda prog, text: made.append(text)):
...     with MSCCLProgram("ag", None, AllGather(2, 1, False), 1):
...         for r in range(2):
...             _ = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
...         XML()
>>> made[0].startswith('<algo name="ag"')
True
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Callable

from msccl_py import toolchain
from msccl_py.language.active import current
from msccl_py.language.call_site import caller

if TYPE_CHECKING:
    from msccl_py.language.program import MSCCLProgram


def say_notes(art: toolchain.Artifact) -> None:
    """Say an artifact's notes on stderr, as a plain run and the commands do."""
    if art.notes:
        print("\n".join(art.notes), file=sys.stderr)


class EmitContext:
    """A capture seen from the DSL: the programs made under it are the DSL's own objects."""

    def __init__(self, cap: toolchain.Capture):
        self.capture = cap

    @property
    def programs(self) -> list["MSCCLProgram"]:
        return [log.program for log in self.capture.logs]


@contextlib.contextmanager
def capture(sink: Callable[["MSCCLProgram", str], None], target: str | None = None,
            force: bool = False):
    """Within the block, ``XML()`` calls ``sink(prog, text)`` with ``target``'s XML.

    The artifacts' notes are said on stderr as they are made.
    """
    def take(art: toolchain.Artifact) -> None:
        say_notes(art)
        sink(art.source.subject, art.text)

    with toolchain.capture(target, force, take) as cap:
        yield EmitContext(cap)


def XML() -> None:
    """Emit the current program's XML (to stdout, or to the compile command's output).

    The result is first judged against the declared collective (its
    ``check()``): a wrong result gets no XML, and a :class:`WrongResultError`
    naming the first wrong chunk and the FILE:LINE that last wrote it
    (``compile --force`` writes it anyway). The XML is then verified
    (``check_xml``) and written in the newer runtimes' dialect, or the one the
    compile command's ``--target`` names. A refusal is an error wherever the
    program runs: ``msccl-py compile``/``run`` exit 2, and a plain ``python
    prog.py > prog.xml`` writes nothing to stdout and exits non-zero with one
    ``error:`` line first on stderr (:mod:`msccl_py.language.script`).

    >>> from msccl_py.language import MSCCLProgram, Buffer, chunk
    >>> from msccl_py.language.collectives import AllGather
    >>> with MSCCLProgram("ag", None, AllGather(2, 1, False), 1):
    ...     for r in range(2):
    ...         _ = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
    ...     XML()     # doctest: +ELLIPSIS
    <algo name="ag" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" ...
    ...
    """
    emit(current())


def emit(prog: "MSCCLProgram", target: str | None = None) -> None:
    """Emit a finished program's XML exactly as ``XML()`` would (library programs use it).

    >>> from msccl_py.language import MSCCLProgram, Buffer, chunk
    >>> from msccl_py.language.collectives import AllGather
    >>> with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
    ...     for r in range(2):
    ...         _ = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
    >>> emit(prog, "msccl")     # doctest: +ELLIPSIS
    <algo name="ag" ...
    ...
    """
    call = caller()
    cap = toolchain.innermost()
    if cap is not None:
        prog.lower()  # the program keeps its lowering for later calls
        prog._remember(cap.take(prog.recording(call), target, prog.check_xml))
        return
    art = prog.compile(target, call=call)
    say_notes(art)
    sys.stdout.write(art.text)
    if not art.text.endswith("\n"):
        sys.stdout.write("\n")
