"""A program run as a plain script (``python prog.py > prog.xml``): all or nothing.

msccl-tools' ``XML()`` prints as it goes, so a script that fails after its
first program, or whose program is refused, leaves a partial or empty file
behind a zero exit status. Here, once a script makes its first
``MSCCLProgram``, what it writes to stdout is held until it ends: a run that
succeeds writes it all, unchanged and in order; a run that fails (an
uncaught exception, a refused program among them) writes nothing to stdout
and exits non-zero, and its first line on stderr is ``error: FILE:LINE:
...`` with any details after it. A compiler error shows no traceback unless
``$MSCCL_PY_DEBUG`` is set; an error in the program's own code keeps its
traceback, after the error line.

Only the script itself is affected, and only from its first ``MSCCLProgram``
on: importing the DSL changes nothing in the process, and the DSL used from a
REPL, a notebook, a test or the ``msccl-py`` commands behaves as before.
"""

from __future__ import annotations

import atexit
import io
import os
import sys
import traceback

from msccl_py.errors import MscclError, WrongResultError, error_report
from msccl_py.language.call_site import is_main_script
from msccl_py.toolchain.capture import traceback_location

#: set to anything but "" or "0" to get the traceback of a compiler error too
DEBUG_ENV = "MSCCL_PY_DEBUG"


class HeldOutput(io.TextIOBase):
    """Stands in for ``sys.stdout`` and keeps what is written until :meth:`release`."""

    def __init__(self, real):
        super().__init__()
        self.real = real
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.parts.append(text)
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.real.isatty()

    @property
    def encoding(self) -> str:
        return getattr(self.real, "encoding", "utf-8")

    def release(self, keep: bool) -> None:
        """Write what was held to the real stream (``keep``) or drop it.

        A piece at a time: one write of megabytes of XML first encodes all of
        it into a new buffer as large (fresh pages, each a page fault); pieces
        reuse the same memory.
        """
        parts, self.parts = self.parts, []
        if keep and parts:
            text = "".join(parts)  # of one part (an XML() call's text): that str itself
            del parts
            write = self.real.write
            for i in range(0, len(text), _PIECE):
                write(text[i:i + _PIECE] if len(text) > _PIECE else text)
            self.real.flush()


#: characters handed to the real stdout per write
_PIECE = 1 << 20


class ScriptRun:
    """The plain-script policy for this process: one error line, held stdout, no XML on failure."""

    def __init__(self):
        self.held: HeldOutput | None = None
        self.failed = False
        #: what the program's Check() calls reported: said after an error line, or at the end
        self.reports: list[str] = []
        self.previous_hook = sys.excepthook
        sys.excepthook = self.excepthook

    def hold(self) -> None:
        """From now on keep stdout until the script ends (once)."""
        if self.held is None:
            self.held = HeldOutput(sys.stdout)
            sys.stdout = self.held
            atexit.register(self.finish)

    def excepthook(self, exc_type, exc, tb) -> None:
        self.failed = True
        debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
        if isinstance(exc, MscclError):
            print(error_report(exc), file=sys.stderr)
            if self.reports and not isinstance(exc, WrongResultError):  # that one says it all
                print("\n".join(f"  {line}" for line in self.reports), file=sys.stderr)
            self.reports = []
            if debug:
                traceback.print_exception(exc_type, exc, tb)
        elif isinstance(exc, KeyboardInterrupt):
            print("error: interrupted", file=sys.stderr)
        else:
            file, line = traceback_location(tb)
            where = f"{file}:{line}: " if file else ""
            print(f"error: {where}{exc_type.__name__}: {exc}", file=sys.stderr)
            self.previous_hook(exc_type, exc, tb)
        if self.held is not None and self.held.parts:
            print("  (nothing was written to standard output)", file=sys.stderr)

    def finish(self) -> None:
        if self.reports:
            print("\n".join(self.reports), file=sys.stderr)
            self.reports = []
        held = self.held
        if held is None:
            return
        if sys.stdout is held:
            sys.stdout = held.real
        try:
            held.release(keep=not self.failed)
        except BrokenPipeError:
            pass
        self.held = None


_run: ScriptRun | None = None


def report(lines: list[str]) -> None:
    """Say what a Check() found: now, or in a script run after its error line (if any)."""
    if _run is not None and _run.held is not None:
        _run.reports.extend(lines)
    else:
        print("\n".join(lines), file=sys.stderr)


def begin_if_script(file: str | None) -> None:
    """Take over error reporting and stdout when ``file`` is the script being run.

    ``MSCCLProgram`` calls it with the FILE of the user's code that makes a
    program; calls from anywhere else do nothing. Importing the DSL never
    does: a REPL, a test run or a library that imports it keeps its
    ``sys.excepthook``, ``sys.stdout`` and exit hooks.
    """
    global _run
    if not is_main_script(file):
        return
    if _run is None:
        _run = ScriptRun()
    _run.hold()
