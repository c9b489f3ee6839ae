"""Building the runtimes' C++ at first use: one cached, locked compile per source hash,
and one ctypes loader for what was built.

The shm runtime's native executor and the GPU kernel's host emulation are
both compiled with the machine's C++ compiler (``$CXX``, else ``g++``) into
``$MSCCL_PY_CACHE/<kind>`` (default ``~/.cache/msccl_py/<kind>``), under a
name that carries a hash of their sources and flags, so a changed source or
flag builds anew and an unchanged one is found. Processes that build at the
same time (ranks started with ``spawn``) serialise on a lock file.
:func:`load` opens a built library and checks its table layout;
:class:`Library` keeps one loaded per process behind the shm runtimes'
native/python switch (the XML and the MSCCL++ plan executors both use it).

>>> cache_dir("native").name
'native'
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

from msccl_py.errors import MscclRuntimeError
from msccl_py.progress import Progress


def cache_dir(kind: str) -> Path:
    """Where built files of ``kind`` (``native``, ``emulation``) are kept."""
    root = os.environ.get("MSCCL_PY_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "msccl_py") / kind


def compiler() -> str | None:
    """The C++ compiler to use ($CXX or g++), or None when there is none."""
    return shutil.which(os.environ.get("CXX", "g++"))


def host_cpu() -> str:
    """This machine's CPU model and features, for the name of a build tuned to it.

    A cache shared between machines (a network home) then keeps one build
    per CPU instead of loading one that uses instructions this CPU lacks.
    """
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features"))]
        return "".join(dict.fromkeys(lines))
    except OSError:
        return platform.processor() or platform.machine()


def digest(files: tuple[Path, ...], cxx: str, flags: tuple[str, ...]) -> str:
    """A short hash of ``files`` (names and contents), the compiler, its flags and this CPU:
    the part of a build's file name that changes whenever what it is built from does."""
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(" ".join((cxx, *flags)).encode())
    h.update(host_cpu().encode())
    return h.hexdigest()[:16]


def build(source: Path, out: Path, cxx: str, flags: tuple[str, ...],
          include: Path | tuple[Path, ...], what: str) -> Path:
    """Compile ``source`` into ``out`` unless it is there already; return ``out``.

    ``include``: the directory (or directories) its ``#include "..."`` headers live in.

    The compiler writes a temporary file that is renamed into place, so a
    reader never loads half a library. A failure raises
    :class:`MscclRuntimeError` whose first line names ``what`` and the
    compiler's first message; the command and the rest of its output follow.
    """
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".build.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if out.exists():
            return out
        fd, tmp = tempfile.mkstemp(suffix=out.suffix, dir=out.parent)
        os.close(fd)
        dirs = (include,) if isinstance(include, Path) else include
        cmd = [cxx, *flags, *(f"-I{d}" for d in dirs), "-o", tmp, str(source)]
        label = what if what.startswith("the ") else f"the native executor ({what})"
        try:
            with Progress(f"building {label}, once", ticker=True):  # tens of seconds
                res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if res.returncode != 0:
                text = (res.stderr or res.stdout).strip()
                first = text.splitlines()[0] if text else f"exit code {res.returncode}"
                raise MscclRuntimeError(f"building {what} failed: {first}\n"
                                        f"{' '.join(cmd)}\n{text[-4000:]}")
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return out


def load(path: Path, bind: Callable[[ctypes.CDLL], None]) -> ctypes.CDLL:
    """Open the built library at ``path``; ``bind`` declares its entry points and checks its
    table layout against the Python side (raising :class:`MscclRuntimeError` if they differ)."""
    lib = ctypes.CDLL(str(path))
    bind(lib)
    return lib


class Library:
    """One built library per process behind a native/python switch.

    :meth:`get` returns None for mode ``python``; otherwise the library, built
    and loaded at first use. A failure (no compiler, a compile error, a table
    layout that differs) is remembered: in mode ``native`` every call raises
    ``<switch>=native but <failure>``; in mode ``auto`` it is noted once on
    stderr as ``msccl_py: <fallback>: <first line>`` and None is returned, so
    the caller runs its Python executor.
    """

    def __init__(self, build: Callable[[], Path], bind: Callable[[ctypes.CDLL], None],
                 switch: str, fallback: str):
        self.build, self.bind, self.switch, self.fallback = build, bind, switch, fallback
        self.lock = threading.Lock()
        self.lib: ctypes.CDLL | None = None
        self.failure: str | None = None

    def get(self, mode: str) -> ctypes.CDLL | None:
        """The loaded library for ``mode`` (``auto``, ``native`` or ``python``), or None."""
        if mode == "python":
            return None
        with self.lock:
            if self.lib is None and self.failure is None:
                try:
                    self.lib = load(self.build(), self.bind)
                except (MscclRuntimeError, OSError) as exc:
                    self.failure = str(exc)
                    if mode != "native":
                        print(f"msccl_py: {self.fallback}: {self.failure.splitlines()[0]}",
                              file=sys.stderr)
            if self.failure is not None and mode == "native":
                raise MscclRuntimeError(f"{self.switch}=native but {self.failure}")
            return self.lib
