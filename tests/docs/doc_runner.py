"""Execute the runnable parts of a Markdown document, as a reader would.

Markers in the Markdown (HTML comments, invisible when rendered):

* ``<!-- file: NAME -->`` before a fenced block: the block is saved as NAME.
* ``<!-- run -->`` before a fenced ``console`` block: each ``$ command`` line
  is run with bash in the scratch directory, and the lines after it are the
  output it must print (stdout and stderr together). A ``...`` line stands
  for any number of lines; ``...`` inside a line for any text (timings).
  The command must exit 0 unless its expected output has a line starting
  with ``error:`` or ``incorrect:``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

_MARK = re.compile(r"^<!--\s*(file:\s*(?P<name>\S+)|(?P<run>run))\s*-->\s*$")


@dataclass
class Command:
    line: int                      # line of the ``$`` in the document
    text: str
    expected: list[str] = field(default_factory=list)

    @property
    def should_fail(self) -> bool:
        return any(e.startswith(("error:", "incorrect:")) for e in self.expected)


@dataclass
class Step:
    kind: str                      # "file" or "run"
    line: int
    name: str = ""
    body: str = ""
    commands: list[Command] = field(default_factory=list)


def parse(doc: Path) -> list[Step]:
    """The marked blocks of ``doc``, in document order."""
    lines = doc.read_text().splitlines()
    steps, i = [], 0
    while i < len(lines):
        m = _MARK.match(lines[i])
        if not m:
            i += 1
            continue
        start = i + 1
        if start >= len(lines) or not lines[start].startswith("```"):
            raise ValueError(f"{doc}:{i + 1}: marker not followed by a fenced block")
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        block = lines[start + 1:end]
        if m.group("name"):
            steps.append(Step("file", i + 1, name=m.group("name"), body="\n".join(block) + "\n"))
        else:
            step = Step("run", i + 1)
            for k, text in enumerate(block):
                if text.startswith("$ "):
                    step.commands.append(Command(start + 2 + k, text[2:]))
                elif step.commands:
                    step.commands[-1].expected.append(text.rstrip())
            steps.append(step)
        i = end + 1
    return steps


def _same(want: str, got: str) -> bool:
    if "..." not in want:
        return want == got
    pattern = ".*".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got) is not None


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines fit ``expected``, where ``...`` skips any lines."""
    pos, skipping = 0, False
    for want in expected:
        if want == "...":
            skipping = True
            continue
        if skipping:
            while pos < len(actual) and not _same(want, actual[pos]):
                pos += 1
        if pos >= len(actual) or not _same(want, actual[pos]):
            return False
        pos += 1
        skipping = False
    return skipping or pos == len(actual)


def run_document(doc: Path, workdir: Path, timeout: float = 120) -> None:
    """Perform every step of ``doc`` in ``workdir``; AssertionError on the first mismatch."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    for step in parse(doc):
        if step.kind == "file":
            (workdir / step.name).write_text(step.body)
            continue
        for cmd in step.commands:
            done = subprocess.run(["bash", "-c", cmd.text], cwd=workdir, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout)
            actual = [a.rstrip() for a in done.stdout.splitlines()]
            where = f"{doc.name}:{cmd.line}: $ {cmd.text}"
            assert (done.returncode != 0) == cmd.should_fail, (
                f"{where}\nexit status {done.returncode}\n{done.stdout}")
            assert matches(cmd.expected, actual), (
                f"{where}\nexpected:\n" + "\n".join(cmd.expected) + "\n\ngot:\n" + done.stdout)
