"""Run an MSCCLang program file as ``python PROGRAM.py ARGS`` would, capturing its XML.

The toolchain runs the file (:func:`msccl_py.toolchain.run_program_file`);
this is that run seen from the DSL: each result names the
:class:`MSCCLProgram` that made it, and the artifacts' notes are said on
stderr as they come.

>>> import tempfile, os
>>> tmp = tempfile.TemporaryDirectory()
>>> path = os.path.join(tmp.name, "ag.py")
>>> _ = open(path, "w").write('''if True:
...     from msccl_py.language import *
...     from msccl_py.language.collectives import AllGather
...     with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
...         for r in range(2):
...             chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
...         XML()
... ''')
>>> [(r.program.name, r.xml[:9]) for r in run_program_file(path, [])]
[('ag', '<algo nam')]
>>> tmp.cleanup()
"""

from __future__ import annotations

from dataclasses import dataclass

from msccl_py import ir, toolchain
from msccl_py.language.emit import say_notes
from msccl_py.language.program import MSCCLProgram


@dataclass
class ProgramResult:
    """One ``XML()`` call of a program run."""

    program: MSCCLProgram
    algorithm: ir.Algorithm
    xml: str
    artifact: toolchain.Artifact

    @property
    def check_ok(self) -> bool | None:
        """False when any ``Check()`` of this program failed; None when it never checked."""
        return self.program.log.passed

    @property
    def collective(self):
        return self.program.collective


@dataclass
class RunOutcome:
    """Everything one program file produced."""

    results: list[ProgramResult]
    programs: list[MSCCLProgram]

    @property
    def check_failed(self) -> bool:
        return any(p.log.passed is False for p in self.programs)


def run_program_file(path: str, args: list[str], target: str | None = None) -> list[ProgramResult]:
    """The ``XML()`` outputs of running ``path`` with ``args`` (see :func:`run_program`)."""
    return run_program(path, args, target).results


def run_program(path: str, args: list[str], target: str | None = None,
                force: bool = False) -> RunOutcome:
    """Execute program file ``path`` with ``sys.argv = [path, *args]``.

    ``XML()`` output is captured (written in ``target``'s dialect), not printed;
    ``force`` makes ``XML()`` write a program whose result is not its
    collective's (with a warning) instead of raising.
    A failure inside the program becomes a :class:`ProgramError` naming the
    program's line; a nonzero ``sys.exit`` of the program becomes one too.
    """
    cap = toolchain.run_program_file(path, args, target, force, say_notes)
    return RunOutcome([ProgramResult(a.source.subject, a.algorithm, a.text, a)
                       for a in cap.artifacts], [log.program for log in cap.logs])
