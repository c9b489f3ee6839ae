"""``MSCCL_PY_ALGO_DIR``: an algorithm directory the communicator runs, as an MSCCL runtime would.

A directory as ``msccl-py tune`` writes it (or one written by hand): XML
files, and ``report/`` (skipped). Which file serves a call follows the rule
of the directory's dialect (:mod:`msccl_py.tuning.selection`: the size
window, the chunk count, the call kind, how many files load and in which
order); a call no file serves runs the library's program, as an MSCCL
runtime falls back to NCCL. The dialect is the one ``tune`` wrote the
directory for (its ``report/tune.txt``), else ``$MSCCL_PY_ALGO_DIALECT``,
else ``msccl-executor``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from msccl_py import ir
from msccl_py.errors import MscclError, MscclRuntimeError
from msccl_py.tuning import selection

ENV_DIR = "MSCCL_PY_ALGO_DIR"
ENV_DIALECT = "MSCCL_PY_ALGO_DIALECT"
#: the runtimes' call size is the output of a gathering collective
_GATHERING = ("allgather",)


@dataclass
class AlgoDir:
    """The XML files of an algorithm directory, in the order its dialect loads them."""

    path: Path
    dialect: str
    metas: list[selection.AlgoMeta]

    @classmethod
    def load(cls, path: str | os.PathLike, dialect: str | None = None) -> AlgoDir:
        root = Path(path)
        if not root.is_dir():
            raise MscclRuntimeError(f"{ENV_DIR}={os.fspath(path)!r} is not a directory")
        dialect = dialect or _tuned_for(root) or os.environ.get(ENV_DIALECT) or "msccl-executor"
        selection.rule(dialect)          # an unknown dialect is an error here
        files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
        # microsoft/msccl loads MSCCL_XML_FILES in its order: tune's report gives it
        order = _listed(root, files) if dialect == "msccl" else \
            selection.load_order(files, dialect)
        metas = []
        for name in order:
            try:
                metas.append(selection.read_meta(name))
            except MscclError as exc:
                raise MscclRuntimeError(f"{ENV_DIR}: {exc}") from None
        return cls(root, dialect, metas)

    def pick(self, collective: str, ngpus: int, nbytes: int, itemsize: int,
             inplace: bool) -> tuple[selection.AlgoMeta, str] | None:
        """The file that serves a call of ``nbytes`` per rank's input (None: none does), and
        why, in the dialect's words."""
        call = nbytes * ngpus if collective in _GATHERING else nbytes
        try:
            k = selection.select(self.metas, collective, ngpus, call, itemsize, inplace,
                                 self.dialect)
        except MscclError:
            return None
        if k is None:
            return None
        meta = self.metas[k]
        lo, hi = selection.window(meta, self.dialect)
        return meta, (f"{ENV_DIR} file {Path(meta.path).name} serves {call} bytes under "
                      f"{self.dialect}'s rule (window {lo}..{'inf' if hi is None else hi}, "
                      f"{'in-place' if inplace else 'out-of-place'}, count divides by "
                      f"{meta.nchunks})")

    def read(self, meta: selection.AlgoMeta) -> ir.Algorithm:
        from msccl_py.targets.msccl import read_xml
        return read_xml(meta.path)


def _tuned_for(root: Path) -> str | None:
    """The dialect ``tune`` wrote ``root`` for (its report's first line), if it says."""
    report = root / "report" / "tune.txt"
    try:
        text = report.read_text()
    except OSError:
        return None
    m = re.search(r"^target (\S+):", text, re.M)
    return m.group(1) if m else None


def _listed(root: Path, files: list[Path]) -> list[str]:
    try:
        text = (root / "report" / "tune.txt").read_text()
    except OSError:
        return [str(f) for f in files]
    m = re.search(r"MSCCL_XML_FILES=(\S+)", text)
    if not m:
        return [str(f) for f in files]
    named = [Path(p).name for p in m.group(1).split(":")]
    by_name = {f.name: f for f in files}
    return [str(by_name[n]) for n in named if n in by_name]


def from_environment() -> AlgoDir | None:
    """The directory ``$MSCCL_PY_ALGO_DIR`` names, loaded (None when unset)."""
    path = os.environ.get(ENV_DIR, "").strip()
    return AlgoDir.load(path) if path else None
