"""The msccl_py exception hierarchy.

Every user-facing failure is an :class:`MscclError`. Subclasses say which
stage failed; each carries enough location to act on (program file and line,
XML line, rank/threadblock/step) and puts it in ``str(exc)``.

>>> try:
...     raise ProgramError("index 9 out of range", file="ring.py", line=12)
... except MscclError as e:
...     print(e)
ring.py:12: index 9 out of range
"""

from __future__ import annotations


class MscclError(Exception):
    """Root of every msccl_py error.

    ``details`` are further lines (what else is wrong, hints); front ends print
    them after the one ``error:`` line, see :func:`error_report`. ``notes``
    are lines the failed step had already made (``note: ...``), said before it.
    """

    details: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def error_report(exc: BaseException) -> str:
    """What a front end prints for ``exc``: ``error: MESSAGE``, then its details indented.

    The error line is the whole verdict and the details follow it; only the
    notes a step made before it failed (``exc.notes``) come first, as they arose.

    >>> e = ProgramError("wrong result", file="ring.py", line=14)
    >>> e.details = ("rank 1 output[2] was never written",)
    >>> print(error_report(e))
    error: ring.py:14: wrong result
      rank 1 output[2] was never written
    """
    lines = [*getattr(exc, "notes", ()), f"error: {exc}"]
    lines += [f"  {line}" for line in getattr(exc, "details", ())]
    return "\n".join(lines)



def did_you_mean(word: str, choices) -> str:
    """``; did you mean `X`?`` naming the choices closest to a misspelt ``word`` ("" if none).

    >>> did_you_mean("linktpye", ["link", "linktype", "switch"])
    '; did you mean `linktype`?'
    >>> did_you_mean("dgx9", ["dgx1", "dgx2", "ndv5"])
    '; did you mean `dgx2` or `dgx1`?'
    """
    import difflib
    scored = sorted(((difflib.SequenceMatcher(None, word, c).ratio(), c) for c in choices),
                    reverse=True)
    if not scored or scored[0][0] < 0.75:
        return ""
    # the best, and a second only when it is as close (two equally likely meanings)
    close = [c for score, c in scored[:2] if score >= scored[0][0] - 0.02]
    return "; did you mean " + " or ".join(f"`{c}`" for c in close) + "?"

class ProgramError(MscclError):
    """A DSL call in the user's program is wrong; points at the user's source line."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        if self.file is not None and self.line is not None:
            return f"{self.file}:{self.line}: {self.message}"
        if self.file is not None:
            return f"{self.file}: {self.message}"
        return self.message


class WrongResultError(ProgramError):
    """A program's result is not its declared collective's (names the first wrong chunk)."""


class TopologyError(ProgramError):
    """A topology file, nvidia-smi output or topology query is wrong (file, line, column)."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 column: int | None = None):
        self.column = column
        super().__init__(message, file, line)

    def _format(self) -> str:
        if self.file is not None and self.line is not None and self.column is not None:
            return f"{self.file}:{self.line}:{self.column}: {self.message}"
        return super()._format()


class LinkError(ProgramError):
    """A copy/reduce over a link the topology lacks."""


class LoweringError(MscclError):
    """The compiler cannot lower the program (names rank, threadblock, step)."""


class CycleError(LoweringError):
    """The instruction dependencies form a cycle; the message names it."""


class XmlError(MscclError):
    """An MSCCL XML file is malformed or breaks a runtime rule; names the line."""

    def __init__(self, message: str, line: int | None = None, file: str | None = None):
        self.message = message
        self.line = line
        self.file = file
        where = ""
        if file is not None:
            where = f"{file}:"
        if line is not None:
            where += f"{line}:" if file is not None else f"line {line}:"
        super().__init__(f"{where} {message}" if where else message)


class LimitError(XmlError):
    """A program exceeds the target runtime's limits (channels, threadblocks, steps)."""


class VerificationError(MscclError):
    """Raised by callers that want a failed verdict as an exception."""


class MscclRuntimeError(MscclError):
    """A runtime failed to execute a plan (names rank and step)."""


class MscclDeadlockError(MscclRuntimeError):
    """A runtime made no progress; the message says which threadblock waits on what."""


class SizeError(MscclError):
    """A message size does not fit the algorithm's chunking."""


class SimulationError(MscclError):
    """The performance model cannot time an algorithm on a machine (names rank/step or link)."""


class LogError(MscclError):
    """An nccl-tests / rccl-tests log cannot be read or fitted; names the file and line."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        where = f"{file}:{line}: " if file and line else f"{file}: " if file else ""
        super().__init__(f"{where}{message}")


class PlanError(MscclError):
    """An MSCCL++ JSON execution plan is malformed; names the file and the JSON path."""

    def __init__(self, message: str, path: str = "", file: str | None = None):
        self.message = message
        self.path = path
        self.file = file
        where = ":".join(w for w in (file, path) if w)
        super().__init__(f"{where}: {message}" if where else message)
