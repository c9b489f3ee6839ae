"""Where ``XML()`` sends a program's XML: stdout, or what a command captures.

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

from msccl_py.language.active import current

if TYPE_CHECKING:
    from msccl_py.language.program import MSCCLProgram


def _sink_stdout(prog: "MSCCLProgram", text: str) -> None:
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")


class EmitContext:
    """Where ``XML()`` sends a program's XML, in which dialect, and which programs were made.

    The compile command pushes one to capture a program file's output.
    """

    def __init__(self, sink: Callable[["MSCCLProgram", str], None] = _sink_stdout,
                 target: str | None = None, force: bool = False):
        self.sink = sink
        self.target = target
        #: write the XML of a program whose result is not its collective's (with a warning)
        self.force = force
        self.programs: list["MSCCLProgram"] = []


#: the innermost last; the first (stdout) is always there
contexts: list[EmitContext] = [EmitContext()]


@contextlib.contextmanager
def capture(sink: Callable[["MSCCLProgram", str], None], target: str | None = None,
            force: bool = False):
    """Within the block, ``XML()`` calls ``sink(prog, text)`` with ``target``'s XML."""
    ctx = EmitContext(sink, target, force)
    contexts.append(ctx)
    try:
        yield ctx
    finally:
        contexts.remove(ctx)



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
    ctx = contexts[-1]
    text = prog.generate_xml(target or ctx.target, force=ctx.force)
    ctx.sink(prog, text)
