"""Finding and loading the program files of the library.

Programs are plain scripts, so they are loaded by path with importlib, each
once per process. Search order: the directories in ``MSCCL_PY_PROGRAMS``
(``os.pathsep``-separated), the checkout's ``programs/`` next to the package,
then ``msccl_py/library/programs/`` (the copy a non-editable install ships).
A name found in an earlier directory hides the same name later. A file's
programs are its ``SPECS`` list, else its ``SPEC``, else the functions it
declares with ``@library_program``, else its entry in ``known.py``.

>>> "allreduce_ring" in names()
True
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Callable

from msccl_py.errors import MscclError, ProgramError, did_you_mean
from msccl_py.library.declare import declared
from msccl_py.library.known import KNOWN_SPECS, Known
from msccl_py.library.spec import ProgramSpec

ENV_PATH = "MSCCL_PY_PROGRAMS"
_PACKAGE = Path(__file__).resolve().parent


@dataclass
class Entry:
    """A loaded program: its declaration, file, module, source hash and build callable.

    ``builder(num_ranks, instances=..., protocol=..., **params)`` returns the
    finished ``MSCCLProgram``.
    """

    spec: ProgramSpec
    path: Path
    module: ModuleType
    source_hash: str
    builder: Callable


_entries: dict[str, Entry] | None = None
_errors: dict[Path, str] = {}
_dirs: tuple[Path, ...] = ()


def search_path() -> list[Path]:
    """The directories searched for program files, in order."""
    dirs = [Path(p) for p in os.environ.get(ENV_PATH, "").split(os.pathsep) if p]
    dirs += [_PACKAGE.parents[1] / "programs", _PACKAGE / "programs"]
    return [d for d in dirs if d.is_dir()]


def _load_module(path: Path) -> ModuleType:
    mod_name = f"msccl_py_programs.{path.stem}"
    module_spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[mod_name]
        raise
    return module


def _script_builder(path: Path, argv: Callable) -> Callable:
    """Builder that runs a script-only program and takes the program from its ``XML()``."""
    def build(num_ranks: int, instances: int = 1, protocol: str = "Simple", **params):
        from msccl_py.language.runner import run_program
        outcome = run_program(str(path), argv(num_ranks, instances, protocol, params))
        if not outcome.results:
            raise ProgramError(f"{path}: the program printed no XML", str(path))
        return outcome.results[-1].program
    return build


def _adapted(adapter: Callable, function: Callable, num_ranks: int, instances: int = 1,
             protocol: str = "Simple", **params):
    return adapter(function, num_ranks, instances, protocol, params)


def _specs_of(path: Path, module: ModuleType) -> list[tuple[ProgramSpec, Callable]]:
    found = getattr(module, "SPECS", None)
    if found is None and hasattr(module, "SPEC"):
        found = [module.SPEC]
    if found is None:
        found = declared(vars(module)) or None
    if found is not None:
        known = [Known(spec) for spec in found]
    else:
        known = KNOWN_SPECS.get(path.stem, [])
    out = []
    for item in known:
        spec = item.spec
        if not isinstance(spec, ProgramSpec):
            raise ProgramError(f"{path}: SPEC entries must be ProgramSpec objects")
        if not callable(getattr(module, spec.build, None)):
            raise ProgramError(f"{path}: program {spec.name} names build function "
                               f"{spec.build!r}, which the file does not define")
        function = getattr(module, spec.build)
        if item.argv is not None:
            builder = _script_builder(path, item.argv)
        elif item.adapter is not None:
            builder = functools.partial(_adapted, item.adapter, function)
        else:
            builder = function
        out.append((replace(spec, source=str(path)), builder))
    return out


def _load_all() -> dict[str, Entry]:
    global _entries, _dirs
    dirs = tuple(search_path())
    if _entries is not None and dirs == _dirs:
        return _entries
    entries: dict[str, Entry] = {}
    _errors.clear()
    seen_stems: set[str] = set()
    for directory in dirs:
        for path in sorted(directory.glob("*.py")):
            if path.stem.startswith("_") or path.stem in seen_stems:
                continue
            seen_stems.add(path.stem)
            data = path.read_bytes()
            try:
                module = _load_module(path)
                specs = _specs_of(path, module)
            except MscclError as exc:
                _errors[path] = str(exc)
                continue
            except (Exception, SystemExit) as exc:  # a broken file must not hide the others
                _errors[path] = f"{type(exc).__name__}: {exc}"
                continue
            digest = hashlib.sha256(data).hexdigest()
            for spec, builder in specs:
                if spec.name in entries:
                    raise ProgramError(f"{path}: program name {spec.name!r} is already defined "
                                       f"by {entries[spec.name].path}")
                entries[spec.name] = Entry(spec, path, module, digest, builder)
    _entries, _dirs = dict(sorted(entries.items())), dirs
    return _entries


def reload() -> None:
    """Forget loaded programs so the next query rescans the search path."""
    global _entries
    _entries = None


def entries() -> dict[str, Entry]:
    """Every loadable program, by name."""
    return _load_all()


def load_errors() -> dict[Path, str]:
    """Program files that failed to load, with the reason (empty when all loaded)."""
    _load_all()
    return dict(_errors)


def names() -> list[str]:
    """Sorted names of every program."""
    return list(_load_all())


def programs() -> list[ProgramSpec]:
    """Every program's declaration, sorted by name.

    >>> len(programs()) >= 25
    True
    """
    return [e.spec for e in _load_all().values()]


def entry(name: str) -> Entry:
    """The loaded program called ``name``; a clear error lists close names otherwise."""
    found = _load_all()
    if name in found:
        return found[name]
    for path, reason in _errors.items():
        if path.stem == name:
            raise ProgramError(f"program {name} failed to load from {path}: {reason}")
    close = did_you_mean(name, found)
    if not close:
        within = [n for n in found if name in n or n in name][:3]
        close = f"; did you mean {' or '.join(f'`{n}`' for n in within)}?" if within else ""
    raise ProgramError(f"unknown program {name!r}{close or '; see `msccl-py list`'}")


def get(name: str) -> ProgramSpec:
    """The declaration of program ``name``."""
    return entry(name).spec
