"""The documentation refers only to things that exist, and its API examples run.

* every relative link in docs/, README.md and examples/README.md points at a
  file (and, for ``page.md#anchor``, at a heading of that page);
* every dotted ``msccl_py.…`` name the pages mention imports or resolves;
* the Python blocks of docs/api.md run, in order, as one script.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md", REPO / "examples" / "README.md"]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_NAME = re.compile(r"\bmsccl_py(?:\.[A-Za-z_]\w*)+")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", page.read_text(), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(page):
    for target in _LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: broken link {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{page.name}: no heading #{anchor} in {dest.name}"


#: the optional extras' modules (pyproject.toml): a documented module that needs one of them
#: is checked to exist, not imported, where that extra is not installed
OPTIONAL = ("torch", "mpi4py", "highspy", "matplotlib", "cupy")


def resolve(name: str):
    """Import the longest module prefix of ``name`` and getattr the rest (a module that
    needs a missing optional extra: its source file is found instead)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        module = ".".join(parts[:k])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] in OPTIONAL and \
                    importlib.util.find_spec(module) is not None:
                return None
            continue
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def test_every_mentioned_name_exists():
    names = set()
    for page in PAGES + sorted((REPO / "examples").glob("*.py")):
        names.update(n.rstrip(".") for n in _NAME.findall(page.read_text()))
    assert len(names) > 20
    missing = []
    for name in sorted(names):
        try:
            resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"documented names that do not exist: {missing}"


def test_api_examples_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(), re.S)
    assert len(blocks) >= 6
    script = tmp_path / "api_examples.py"
    script.write_text("\n".join(blocks))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ok: allgather postcondition holds" in done.stdout


def test_docs_index_lists_every_page():
    index = (REPO / "docs" / "README.md").read_text()
    for page in (REPO / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"({page.name})" in index, page.name
