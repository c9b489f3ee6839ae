"""NCCL-style diagnostics: ``MSCCL_PY_DEBUG=INFO`` says what a joined communicator does.

At start-up, rank 0 prints the launch's layout (hosts, ranks per host) and
the transports (shared memory within a host, the launch's engine between
hosts); on the first call of each collective and size class (a power of
two) it prints the program that runs it (name, channels, instances,
protocol) and why that one. Lines go to standard error, prefixed like
NCCL's (``host:pid:rank``), so they can be told apart from the program's
output. ``MSCCL_PY_DEBUG`` unset (or ``WARN``) prints nothing.

>>> size_class(3 << 20)
'2MiB-4MiB'
"""

from __future__ import annotations

import os
import socket
import sys

ENV = "MSCCL_PY_DEBUG"
LEVELS = ("WARN", "INFO")


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().upper() == "INFO"


def info(rank: int, text: str) -> None:
    """Print one INFO line for ``rank`` (when enabled)."""
    if enabled():
        # one write of the whole line: print() writes the text and the newline apart, and a
        # launcher that forwards every rank's stderr (mpirun) then splices other ranks'
        # lines into the gap
        sys.stderr.write(f"{socket.gethostname()}:{os.getpid()}:{rank} msccl_py INFO {text}\n")
        sys.stderr.flush()


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def size_class(nbytes: int) -> str:
    """The power-of-two range ``nbytes`` falls in (``0B`` for empty calls)."""
    if nbytes <= 0:
        return "0B"
    lo = 1 << (nbytes.bit_length() - 1)
    return f"{_bytes(lo)}-{_bytes(lo * 2)}"


def joined(group, world_size: int) -> None:
    """The start-up lines: layout and transports."""
    if not enabled():
        return
    rank = group.runtime.rank
    lay = group.layout
    if rank == 0:
        between = (f", {group.engine.name} between hosts" if group.link is not None else "")
        shape = lay.shape
        info(rank, f"joined a {group.launch} launch of {world_size} ranks: "
                   f"{lay.describe()}; transports: shm within a host{between}"
                   + (f"; simulate or tune this layout with --layout {shape}"
                      if shape is not None and len(lay.hosts) > 1 else ""))
    if rank == min(group.host.local_ranks):
        info(rank, f"host {group.host.host!r}: ranks {list(group.host.local_ranks)} share one "
                   f"arena" + (f"; {len(group.host.remote)} ranks on other hosts are reached "
                               f"over {group.engine.name}" if group.link is not None else ""))


def chose(rank: int, collective: str, nbytes: int, choice, alg, why: str) -> None:
    """The program line of a collective's first call in a size class."""
    if not enabled() or rank != 0:
        return
    shape = ""
    if alg is not None:
        shape = (f", {alg.nchannels} channel{'s' if alg.nchannels != 1 else ''}, protocol "
                 f"{alg.protocol}")
    inst = choice.params.get("instances")
    info(rank, f"{collective} {size_class(nbytes)} (first call: {_bytes(nbytes)}): "
               f"{choice.name}{shape}" + (f", {inst} instance{'s' if inst != 1 else ''}"
                                          if inst is not None else "") + f"; why: {why}")
