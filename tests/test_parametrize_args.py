"""Every ``parametrize`` gets a collection, not a generator (pytest 9.1 warns, pytest 10 fails).

The argument values are read from the test files themselves: a generator
expression, a call of a generator function of the same file, a ``map``/
``filter``/``zip``/``itertools`` iterator, or a module name bound to one.
"""

from __future__ import annotations

import ast

from repo_paths import REPO

ITERATORS = {"map", "filter", "zip", "reversed", "iter", "enumerate"}


def _is_generator_function(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)
        if not isinstance(n, (ast.FunctionDef, ast.Lambda)) or n is node)


def _iterator_value(node: ast.AST, generators: set[str], names: dict) -> bool:
    if isinstance(node, ast.GeneratorExp):
        return True
    if isinstance(node, ast.Name) and node.id in names:
        return _iterator_value(names[node.id], generators, {})
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id in generators or f.id in ITERATORS
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            return f.value.id == "itertools"
    return False


def offenders(path) -> list[int]:
    """Lines of ``path`` where ``parametrize`` is handed an iterator."""
    tree = ast.parse(path.read_text(), str(path))
    generators = {n.name for n in ast.walk(tree) if _is_generator_function(n)}
    names = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "parametrize"):
            values = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "argvalues"), None)
            if values is not None and _iterator_value(values, generators, names):
                found.append(node.lineno)
    return found


def test_no_parametrize_takes_an_iterator():
    found = [f"{path.relative_to(REPO)}:{line}"
             for path in sorted((REPO / "tests").rglob("test_*.py")) for line in offenders(path)]
    assert not found, "pass a list: " + ", ".join(found)


def test_the_check_sees_a_generator(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import pytest\n\ndef cases():\n    yield 1\n\n"
                   "@pytest.mark.parametrize('x', cases())\ndef test_x(x):\n    pass\n\n"
                   "@pytest.mark.parametrize('y', (i for i in range(2)))\ndef test_y(y):\n"
                   "    pass\n\n@pytest.mark.parametrize('z', list(cases()))\n"
                   "def test_z(z):\n    pass\n")
    assert offenders(bad) == [6, 10]
