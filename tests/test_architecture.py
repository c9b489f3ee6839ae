"""The house's rules, checked on the code: layers, no import circles, file sizes.

The layers and what each may import are written in docs/architecture.md; LAYERS
below is the same table. Every import counts, lazy ones inside functions too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

from repo_paths import PROGRAMS, REPO

PACKAGE = REPO / "msccl_py"

#: (layer, room prefixes) from the bottom up; a module belongs to the room whose prefix
#: is its longest match. An import must point to a lower layer or stay inside its room.
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (0, ("msccl_py.errors", "msccl_py.progress", "msccl_py.version",
         "msccl_py.collective_table")),
    (1, ("msccl_py.ir", "msccl_py.mscclpp_ir")),
    (2, ("msccl_py.topologies", "msccl_py.plan", "msccl_py.transport")),
    (3, ("msccl_py.targets.msccl", "msccl_py.targets.mscclpp", "msccl_py.compiler",
         "msccl_py.analysis")),
    (4, ("msccl_py.verify", "msccl_py.simulate", "msccl_py.runtime")),
    (5, ("msccl_py.toolchain",)),
    (6, ("msccl_py.language",)),
    (7, ("msccl_py.collectives", "msccl_py.library")),
    (8, ("programs",)),
    (9, ("msccl_py.synthesis",)),
    (10, ("msccl_py.tuning",)),
    (11, ("msccl_py.comm",)),
    (12, ("msccl_py.mpi", "msccl_py.torch")),
    (13, ("msccl_py.cli",)),
    (14, ("msccl_py.__main__", "msccl_py")),
]
#: the algorithm library's program files are the library's data: they sit in its room
#: (``programs.NAME``) and may import what the library may.
MAX_LINES = 600

ROOMS: dict[str, int] = {room: layer for layer, rooms in LAYERS for room in rooms}
def _module_name(path: Path) -> str:
    root = PROGRAMS.parent if path.is_relative_to(PROGRAMS) else REPO
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py")) + sorted(PROGRAMS.glob("*.py"))


MODULES: dict[str, Path] = {_module_name(p): p for p in _files()}


def room_of(module: str) -> str:
    """The longest room prefix of ``module`` (on dotted boundaries)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in ROOMS:
            return prefix
    raise KeyError(f"{module} is in no room of LAYERS")


def _resolve(module: str, name: str) -> str:
    """``from module import name``: the submodule when ``name`` is one, else ``module``."""
    sub = f"{module}.{name}"
    return sub if sub in MODULES else module


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """Every module of ours ``module`` imports (anywhere in the file), with its line."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found += [(_resolve(target, alias.name), node.lineno) for alias in node.names]
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
                   or isinstance(node.func, ast.Name) and node.func.id in ("import_module",
                                                                           "__import__"))):
            found.append((node.args[0].value, node.lineno))
    return [(name, line) for name, line in found
            if name.split(".")[0] in ("msccl_py", "programs") and name != module]


def import_graph() -> nx.DiGraph:
    """Files as nodes, an edge per import of one of ours, with the line as data."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module, path in MODULES.items():
        for target, line in _imports(module, path):
            if target.startswith("programs") and target not in MODULES:
                continue
            graph.add_edge(module, target, line=line)
    return graph


GRAPH = import_graph()


def test_every_module_has_a_room():
    homeless = [m for m in MODULES if not any(
        m == room or m.startswith(room + ".") for room in ROOMS)]
    assert homeless == []


def test_imports_point_down():
    """An import points to a strictly lower layer or stays in its own room; no arrow up,
    none sideways between two rooms of one layer."""
    bad = []
    for source, target, data in GRAPH.edges(data=True):
        here, there = room_of(source), room_of(target)
        if here != there and ROOMS[there] >= ROOMS[here]:
            way = "up" if ROOMS[there] > ROOMS[here] else "sideways"
            bad.append(f"{MODULES[source].relative_to(REPO)}:{data['line']}: {source} "
                       f"(layer {ROOMS[here]}) imports {target} (layer {ROOMS[there]}, {way})")
    assert bad == []


def _circles() -> list[frozenset[str]]:
    return [frozenset(c) for c in nx.strongly_connected_components(GRAPH) if len(c) > 1]


def test_no_import_circles():
    """No circle between files, inside a room or across rooms."""
    assert sorted(sorted(c) for c in _circles()) == []


def test_files_under_line_limit():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_layers_match_docs():
    """docs/architecture.md's layer table is this file's LAYERS."""
    text = (REPO / "docs" / "architecture.md").read_text()
    documented = {int(layer): set(re.findall(r"`([\w.]+)`", rooms))
                  for layer, rooms in re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|", text, re.M)}
    assert documented == {layer: set(rooms) for layer, rooms in LAYERS}


def test_checker_sees_lazy_and_relative_imports(tmp_path):
    """The parser counts an import inside a function, relative ones and import_module."""
    init = tmp_path / "__init__.py"   # parsed as if it were msccl_py/plan/__init__.py
    init.write_text("def f():\n    from msccl_py.cli import main\n"
                    "from .. import errors\nfrom . import tables\n"
                    "import importlib\nimportlib.import_module('msccl_py.library')\n")
    found = {name for name, _ in _imports("msccl_py.plan", init)}
    assert found == {"msccl_py.cli", "msccl_py.errors", "msccl_py.plan.tables",
                     "msccl_py.library"}


def _edges_between(source_prefix: str, target_prefixes: tuple[str, ...]) -> list[str]:
    return [f"{MODULES[s].relative_to(REPO)}:{d['line']}: {s} imports {t}"
            for s, t, d in GRAPH.edges(data=True)
            if (s == source_prefix or s.startswith(source_prefix + "."))
            and any(t == p or t.startswith(p + ".") for p in target_prefixes)]


def test_targets_are_formats_only():
    """A target reads and writes its format: it runs, verifies and simulates nothing."""
    assert _edges_between("msccl_py.targets", ("msccl_py.runtime", "msccl_py.verify",
                                               "msccl_py.simulate")) == []


def test_runtimes_read_no_format():
    """The runtimes take IR and plans; callers read the files (no runtime imports a target)."""
    assert _edges_between("msccl_py.runtime", ("msccl_py.targets",)) == []


def test_package_root_imports_nothing_heavy():
    """``import msccl_py`` loads the errors and the version only: no NumPy, no lxml."""
    import subprocess
    import sys
    code = ("import sys, msccl_py; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'lxml', 'networkx', 'lark', 'torch', 'mpi4py', 'cupy') "
            "or m.startswith('msccl_py.') and m not in ('msccl_py.errors', 'msccl_py.version')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _documented_layout() -> dict[str, set[str]]:
    """Folder (relative to msccl_py/) -> the names docs/architecture.md's Layout lists there."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    listed: dict[str, set[str]] = {}
    top = folder = ""
    for line in block.splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        words = line.split()
        if not words or indent == 0:
            continue
        if words[0].endswith("/") and indent <= 4:
            folder = words[0] if indent == 2 else top + words[0]
            top = folder if indent == 2 else top
            words = words[1:]
        elif indent == 2:
            folder = top = ""
        listed.setdefault(folder, set()).update(re.findall(r"[\w.]+", " ".join(words)))
    return listed


def test_every_module_is_listed_in_the_layout():
    listed = _documented_layout()
    missing = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".cpp", ".h", ".cu") or "__pycache__" in path.parts:
            continue
        folder = str(path.parent.relative_to(PACKAGE)) + "/" if path.parent != PACKAGE else ""
        name = path.stem if path.suffix == ".py" else path.name
        if name not in listed.get(folder, set()):
            missing.append(str(path.relative_to(REPO)))
    assert missing == []
