"""Program files run under a capture: what their ``XML()`` calls make comes back as data.

A capture is the context a command runs a program file in. The DSL hands
each ``XML()`` call's recording to the innermost capture, which compiles it
with the capture's target and policy and keeps the artifact; with no
capture the DSL compiles and prints itself (a plain ``python prog.py``).
Captures also keep the :class:`ProgramLog` of every program made under
them, so a command sees the failed checks of programs that wrote no XML.

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
>>> tmp = tempfile.TemporaryDirectory()
>>> path = os.path.join(tmp.name, "ag.py"); _ = open(path, "w").write(src)
>>> [a.algorithm.collective for a in run_program_file(path, []).artifacts]
['allgather']
>>> tmp.cleanup()
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from dataclasses import dataclass, field
from typing import Callable

from msccl_py.errors import MscclError, ProgramError
from msccl_py.toolchain.artifact import Artifact, Policy
from msccl_py.toolchain.pipeline import compile
from msccl_py.toolchain.sources import ProgramLog, Recording

#: frames whose file starts with this are the package's own, not the user's
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(eq=False)
class Capture:
    """Where ``XML()`` calls go while a command runs a program: compiled for ``target``.

    ``force`` writes a program whose result is not its collective's (with a
    warning note) instead of refusing it; ``on_artifact`` is called with
    each artifact as it is made (a command prints its notes there, so they
    come in order with the program's own output).
    """

    target: str | None = None
    force: bool = False
    on_artifact: Callable[[Artifact], None] | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    logs: list[ProgramLog] = field(default_factory=list)
    #: ids of the logs kept (each is kept alive by ``logs``)
    seen: set[int] = field(default_factory=set, repr=False)

    def take(self, rec: Recording, target: str | None = None, verify: bool = True) -> Artifact:
        """Compile one ``XML()`` call's recording (``target`` overrides the capture's)."""
        art = compile(rec, target or self.target, Policy(verify=verify, force=self.force))
        self.artifacts.append(art)
        if self.on_artifact is not None:
            self.on_artifact(art)
        return art

    @property
    def check_failed(self) -> bool:
        """Whether any Check() of a program made under the capture failed."""
        return any(log.passed is False for log in self.logs)


#: the captures in force, innermost last
_captures: list[Capture] = []


@contextlib.contextmanager
def capture(target: str | None = None, force: bool = False,
            on_artifact: Callable[[Artifact], None] | None = None):
    """Within the block, ``XML()`` calls compile into the yielded :class:`Capture`."""
    cap = Capture(target, force, on_artifact)
    _captures.append(cap)
    try:
        yield cap
    finally:
        _captures.remove(cap)


def innermost() -> Capture | None:
    """The capture an ``XML()`` call goes to now; None in a plain run."""
    return _captures[-1] if _captures else None


def register(log: ProgramLog) -> None:
    """Keep a program's log in every capture in force (once, however often it is entered)."""
    for cap in _captures:
        if id(log) not in cap.seen:  # a program's block may be entered again
            cap.seen.add(id(log))
            cap.logs.append(log)


def run_program_file(path: str, args: list[str], target: str | None = None,
                     force: bool = False,
                     on_artifact: Callable[[Artifact], None] | None = None) -> Capture:
    """Execute program file ``path`` with ``sys.argv = [path, *args]`` under a capture.

    Returns the capture: the artifact of each ``XML()`` call (compiled for
    ``target``) and the log of each program made. A failure inside the
    program becomes a :class:`ProgramError` naming the program's line; a
    nonzero ``sys.exit`` of the program becomes one too.
    """
    if not os.path.isfile(path):
        raise ProgramError(f"no such program file: {path}")
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with capture(target, force, on_artifact) as cap:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            raise ProgramError(f"program exited with status {code}"
                               + (f": {code}" if isinstance(code, str) else ""),
                               path) from None
    except ProgramError as exc:
        _locate(exc)
        raise
    except MscclError:
        raise
    except Exception as exc:
        file, line = traceback_location(exc.__traceback__)
        raise ProgramError(f"{type(exc).__name__}: {exc}", file or path, line) from exc
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
    return cap


def _locate(exc: ProgramError) -> None:
    """Give an error raised below the program's code without a place (a topology file that
    is missing, say) the program's line that called it."""
    if exc.file is not None or exc.line is not None:
        return
    file, line = traceback_location(exc.__traceback__)
    if file is not None:
        exc.file, exc.line = file, line
        exc.args = (exc._format(),)


def traceback_location(tb) -> tuple[str | None, int | None]:
    """``(file, line)`` of the deepest frame of traceback ``tb`` in the user's code."""
    file = line = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not os.path.abspath(name).startswith(PACKAGE_DIR) and "runpy" not in name \
                and not name.startswith("<frozen"):
            file, line = name, tb.tb_lineno
        tb = tb.tb_next
    return file, line
