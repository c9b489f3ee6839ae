"""Run an MSCCLang program file as ``python PROGRAM.py ARGS`` would, capturing its XML.

>>> import tempfile, textwrap, os
>>> src = textwrap.dedent('''
...     from msccl_py.language import *
...     from msccl_py.language.collectives import AllGather
...     with MSCCLProgram("ag", None, AllGather(2, 1, False), 1):
...         for r in range(2):
...             c = chunk(r, Buffer.input, 0)
...             c.copy(r, Buffer.output, r); c.copy(1 - r, Buffer.output, r)
...         Check(); XML()
... ''')
>>> path = os.path.join(tempfile.mkdtemp(), "ag.py"); _ = open(path, "w").write(src)
>>> [r.algorithm.collective for r in run_program_file(path, [])]
['allgather']
"""

from __future__ import annotations

import os
import runpy
import sys
from dataclasses import dataclass

from msccl_py import ir
from msccl_py.errors import MscclError, ProgramError
from msccl_py.language.emit import capture
from msccl_py.language.program import MSCCLProgram
from msccl_py.language.source import traceback_location


@dataclass
class ProgramResult:
    """One ``XML()`` call of a program run."""

    program: MSCCLProgram
    algorithm: ir.Algorithm
    xml: str

    @property
    def check_ok(self) -> bool | None:
        """False when any ``Check()`` of this program failed; None when it never checked."""
        res = self.program.check_results
        return all(res) if res else None

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
        return any(not all(p.check_results) for p in self.programs if p.check_results)


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
    if not os.path.isfile(path):
        raise ProgramError(f"no such program file: {path}")
    results: list[ProgramResult] = []

    def sink(prog: MSCCLProgram, text: str) -> None:
        results.append(ProgramResult(prog, prog.lower(), text))

    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with capture(sink, target, force) as ctx:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            raise ProgramError(f"program exited with status {code}"
                               + (f": {code}" if isinstance(code, str) else ""),
                               path) from None
    except MscclError:
        raise
    except Exception as exc:
        raise _wrap(exc, path) from exc
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
    return RunOutcome(results, ctx.programs)


def _wrap(exc: Exception, path: str) -> ProgramError:
    """A program's own exception, located at the deepest frame in user code."""
    file, line = traceback_location(exc.__traceback__)
    return ProgramError(f"{type(exc).__name__}: {exc}", file or path, line)
