"""On-disk cache of compiled programs (XML text, or the IR as JSON), safe for concurrent processes.

The key covers everything that changes the output: program name, rank count,
instances, protocol, parameters, XML target, the msccl_py version, a hash of
the program file and a hash of the toolchain sources (see ``_TOOLCHAIN``), so
editing any of them invalidates old entries. Entries are
written to a temporary file in the cache directory and renamed into place,
so a reader sees either nothing or a whole file.

The entries together stay under a size cap (``$MSCCL_PY_CACHE_MAX``, default
2 GiB; a 1000-rank ring alone is 240 MB): a read marks an entry used (its
modification time), and a store past the cap removes the least recently
used entries first. An entry larger than the cap is not stored.

>>> key = cache_key({"name": "allreduce_ring", "num_ranks": 4})
>>> len(key)
64
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from msccl_py.errors import MscclError
from msccl_py.version import __version__

ENV_CACHE = "MSCCL_PY_CACHE"
ENV_CACHE_MAX = "MSCCL_PY_CACHE_MAX"
#: the entries' size cap when ``$MSCCL_PY_CACHE_MAX`` does not say
DEFAULT_CACHE_MAX = 2 << 30
_ROOT = Path(__file__).resolve().parent.parent     # the msccl_py package
#: sources (relative to the package) whose edits change compiled output: the DSL, toolchain
#: and compiler, the XML writer, the verifier and geometry the compiler asks for maxBytes, the
#: topologies programs are built over, and the library's own pattern, collective and
#: declaration helpers
_TOOLCHAIN = ("language", "toolchain", "compiler", "targets/msccl", "ir.py",
              "verify", "plan", "topologies", "library/patterns.py", "library/rooted.py",
              "library/scaled.py", "library/collectives_extra.py", "library/declare.py", "library/prelude.py")


def cache_dir(directory: str | os.PathLike | None = None) -> Path:
    """The cache directory: the argument, else ``$MSCCL_PY_CACHE``, else ``~/.cache/msccl_py``.

    >>> str(cache_dir("/tmp/x"))
    '/tmp/x'
    """
    if directory is not None:
        return Path(directory)
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "msccl_py"


@functools.lru_cache(maxsize=1)
def toolchain_hash() -> str:
    """Hash of the sources that turn a program into XML (computed once per process)."""
    digest = hashlib.sha256(__version__.encode())
    for name in _TOOLCHAIN:
        path = _ROOT / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
        for file in files:
            digest.update(str(file.relative_to(_ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def cache_key(fields: dict[str, Any]) -> str:
    """Stable hex key for ``fields`` plus the toolchain hash."""
    payload = json.dumps({"fields": fields, "toolchain": toolchain_hash(),
                          "version": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


#: entry kinds (file suffixes): MSCCL XML text with its notes, and the IR (toolchain.persist)
XML, IR = ".xml.json", ".ir.json"


def load(directory: Path, key: str, kind: str) -> str | None:
    """The cached text of kind ``kind`` for ``key``, or None."""
    path = directory / f"{key}{kind}"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MscclError(f"cannot read cache entry {directory / key}{kind}: {exc}") from exc
    try:
        os.utime(path)          # used now: the last to go when the cache is over its cap
    except OSError:
        pass
    return text


def store(directory: Path, key: str, text: str, kind: str) -> Path:
    """Write ``text`` as the entry of kind ``kind`` for ``key`` atomically; returns its path.
    Then the least recently used entries go until the cache is under its cap
    (:func:`size_cap`); an entry over the cap by itself is not written."""
    target = directory / f"{key}{kind}"
    cap = size_cap()
    if len(text) > cap:
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise MscclError(f"cannot write cache entry {target}: {exc}") from exc
    evict(directory, cap, keep=target)
    return target


def size_cap() -> int:
    """The entries' size cap in bytes: ``$MSCCL_PY_CACHE_MAX`` (a size, e.g. ``500MiB``), else
    :data:`DEFAULT_CACHE_MAX`."""
    text = os.environ.get(ENV_CACHE_MAX)
    if not text:
        return DEFAULT_CACHE_MAX
    from msccl_py.plan.sizes import parse_size
    try:
        return parse_size(text)
    except MscclError:
        raise MscclError(f"{ENV_CACHE_MAX}={text!r} is not a size (e.g. 2GiB)") from None


def evict(directory: Path, cap: int, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries until those left total at most ``cap`` bytes
    (never ``keep``, the entry just written); returns what was removed."""
    entries = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                if e.name.endswith((XML, IR)) and not e.name.startswith("."):
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    entries.append((st.st_mtime, st.st_size, Path(e.path)))
    except OSError:
        return []
    total = sum(size for _, size, _ in entries)
    removed = []
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= cap:
            break
        if keep is not None and path == keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed


def discard(directory: Path, key: str, kind: str) -> None:
    """Remove the entry of kind ``kind`` for ``key`` if present (a stale or unreadable entry)."""
    try:
        (directory / f"{key}{kind}").unlink()
    except FileNotFoundError:
        pass
