"""Helpers to replay MSCCLang programs from other repositories with msccl_py.

A program runs with only its imports renamed (``msccl`` to ``msccl_py``), in a
temporary folder; its outcome is one of ``correct`` (every XML it wrote
verifies against the declared collective), ``refused`` (an msccl_py error, or
its own ``Check()`` said False) or ``wrong`` (XML written that does not
compute the collective).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from msccl_py.errors import MscclError
from msccl_py.language.runner import run_program
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml

MIRRORS = Path(os.environ.get("MSCCL_MIRRORS", "/work/.mirror"))
MIRROR = MIRRORS / "microsoft+msccl-tools" / "repo"
LOCAL = Path("/work/ref/msccl-tools")


def rename_imports(text: str) -> str:
    """The program with ``msccl`` imports renamed to ``msccl_py``; nothing else changes."""
    text = re.sub(r"^(\s*from\s+)msccl(?=[.\s])", r"\1msccl_py", text, flags=re.M)
    return re.sub(r"^(\s*import\s+)msccl(?=[.\s]|$)", r"\1msccl_py", text, flags=re.M)


def find_checkout(tmp: Path) -> Path | None:
    """A msccl-tools tree: $MSCCL_TOOLS_DIR, the local reference, or the mirror unpacked."""
    env = os.environ.get("MSCCL_TOOLS_DIR")
    if env:
        return Path(env) if (Path(env) / "msccl").is_dir() else None
    if (LOCAL / "msccl").is_dir():
        return LOCAL
    if MIRROR.is_dir():
        dst = tmp / "msccl-tools"
        dst.mkdir(exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", str(MIRROR), "archive", "HEAD",
                                  "examples", "tests"], capture_output=True, check=False)
        if archive.returncode == 0:
            subprocess.run(["tar", "-x", "-C", str(dst)], input=archive.stdout, check=True)
            return dst
    return None


def foreign_source(repo: str, commit: str, path: str) -> str | None:
    """A program of another repository at ``commit``, from its mirrored git repository
    (``$MSCCL_MIRRORS/owner+name/repo``); None when that is not here."""
    git_dir = MIRRORS / repo.replace("/", "+", 1) / "repo"
    if not git_dir.is_dir():
        return None
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"],
                          capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def run_renamed(source: Path, args: list[str], target: str | None = None) -> tuple[str, str]:
    """Run ``source`` with its imports renamed; ``(outcome, detail)`` as the module says."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / source.name
        path.write_text(rename_imports(source.read_text()))
        try:
            outcome = run_program(str(path), args, target)
        except MscclError as exc:
            return "refused", str(exc)
    if outcome.check_failed:
        return "refused", "Check() returned False"
    if not outcome.results:
        return "refused", "no XML written"
    for res in outcome.results:
        alg = read_xml(res.xml)  # what was written, after dependence_nop's hoisting
        custom = alg.collective == "custom"
        post = res.program.postcondition() if custom else None
        v = verify(alg, target=_dialect(res.xml), postcondition=post)
        if v.status != "ok":
            return "wrong", str(v)
    return "correct", f"{len(outcome.results)} XML verified"


_ALGO = re.compile(r"<algo\b.*?</algo>", re.S)


def check_plain_run(source: Path, args: list[str]) -> str:
    """Run ``source`` (imports renamed) as ``python PROGRAM ARGS > out.xml`` would, and check
    the all-or-nothing rule: exit 0 and only verified XML on stdout, or a non-zero exit,
    nothing on stdout and ``error:`` first on stderr. Returns ``correct``, ``refused`` or
    ``no XML`` (it exited 0 having made no program)."""
    repo = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / source.name
        path.write_text(rename_imports(source.read_text()))
        env = dict(os.environ, PYTHONPATH=str(repo))
        env.pop("MSCCL_PY_DEBUG", None)
        proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                              cwd=tmp, env=env, timeout=900)
    if proc.returncode != 0:
        assert proc.stdout == "", f"exit {proc.returncode} with output:\n{proc.stdout[:500]}"
        if not _failed_before_msccl_py(proc.stderr, path.name, source.read_text()):
            assert proc.stderr.startswith("error: "), proc.stderr[-2000:]
        return "refused"
    xmls = _ALGO.findall(proc.stdout)
    if not xmls:      # it made no program (and refused none)
        assert proc.stdout.strip() == "" or "<algo" not in proc.stdout, proc.stdout[:500]
        return "no XML"
    for xml in xmls:
        alg = read_xml(xml)
        if alg.collective != "custom":  # a custom one is judged by its program, in-process
            v = verify(alg, target=_dialect(xml))
            assert v.status == "ok", str(v)
    return "correct"


def _failed_before_msccl_py(stderr: str, name: str, text: str) -> bool:
    """Python stopped the program before it imported msccl_py (a syntax error, a missing
    module, a bug above the import): nothing of ours could say a word."""
    last = (stderr.strip().splitlines() or [""])[-1]
    if last.startswith(("SyntaxError", "IndentationError", "TabError")):
        return True          # the file never ran
    if not stderr.startswith("Traceback"):
        return False
    first = next((i for i, line in enumerate(text.splitlines(), 1) if "msccl" in line
                  and re.match(r"\s*(from|import)\s", line)), None)
    lines = [int(m) for m in re.findall(rf'File ".*{re.escape(name)}", line (\d+)', stderr)]
    return first is None or not lines or lines[-1] < first


def _dialect(xml: str) -> str:
    """The target an XML was written for, from how it spells things (custom: old runtime)."""
    head = xml[:xml.index(">")]
    if 'coll="custom"' in head or "outofplace" not in head:
        return "msccl"
    return "msccl-executor"
