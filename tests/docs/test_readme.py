"""README.md's taste runs as shown, and its quick start keeps its two commands."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_runner import parse, run_document  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_taste_runs_as_shown(tmp_path):
    run_document(README, tmp_path)


def test_readme_taste_is_short():
    files = [s for s in parse(README) if s.kind == "file"]
    assert len(files) == 1 and len(files[0].body.splitlines()) <= 20


def test_quick_start_commands_unchanged():
    text = README.read_text()
    assert ("pip install -e . && msccl-py run programs/alltonext_backward.py 2 1 --bytes 1MiB"
            in text)
    assert 'pip install -e ".[test]" && python -m pytest -q' in text


def test_errors_are_one_line_first_as_the_readme_says(capsys):
    """A wrong program: `error: FILE:LINE: ...` is the first line, details indented after."""
    import re

    from msccl_py.cli import main
    assert "one line `error: FILE:LINE: ...`, first on\nstderr" in README.read_text()
    prog = README.parent / "tests" / "data" / "mscclang" / "allgather_ring_missing_step.py"
    assert main(["compile", "-o", "-", str(prog)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, *rest = err.splitlines()
    assert re.match(rf"error: {re.escape(str(prog))}:\d+: ", first), first
    assert all(line.startswith("  ") for line in rest), rest


def test_ci_runs_the_readme_test_command_and_names_only_documented_extras():
    """`.ci/run` runs the README's test command as written; every extra it installs before
    is one the README's optional-extras table names (so the README's run is CI's run less
    what skips without them)."""
    import re
    ci = (README.parent / ".ci" / "run").read_text()
    text = README.read_text()
    command = 'pip install -e ".[test]" && python -m pytest -q'
    assert command in text
    assert [line.strip() for line in ci.splitlines()][-1] == command
    extras = set()
    for m in re.finditer(r'pip install [^\n]*?-e "\.\[([a-z0-9,]+)\]"', ci):
        extras.update(m.group(1).split(","))
    extras.discard("test")
    assert extras, ci
    table = text.split("### Optional extras", 1)[1]
    for extra in extras:
        assert f"\n| {extra} |" in table or f"\n| {extra} (" in table, extra
    # the torch .ci/run pins is the README's CPU build (CI reaches no index but its registry's)
    torch_pin = re.search(r"pip install (-q )?(torch==\S+)", ci)
    assert torch_pin and f"{torch_pin.group(2)} --index-url" in table
