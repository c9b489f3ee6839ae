"""Memory before work: what a call will hold, checked against what the machine has free.

A run of ``--bytes 64GiB`` would otherwise end in NumPy's allocation error, and
one just under the machine's memory in the kernel's out-of-memory killer, which
picks any process of a shared machine. :func:`check_fits` refuses such a call
in one line with both figures before anything is allocated. The figure free is
the kernel's ``MemAvailable`` (``/proc/meminfo``, see proc(5)): what can be
allocated without swapping, page cache included. Where it cannot be read
(not Linux), nothing is checked.

>>> need_bytes([(4, 4, 0)] * 4, 1 << 20, 4, inplace=True, staged=True) >> 20   # MiB
256
"""

from __future__ import annotations

from collections.abc import Iterable

from msccl_py.errors import MscclRuntimeError

#: where Linux says how much memory can be allocated without swapping
MEMINFO = "/proc/meminfo"


def available_bytes() -> int | None:
    """The machine's ``MemAvailable`` in bytes, or None where it cannot be read."""
    try:
        with open(MEMINFO, "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024     # given in kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def need_bytes(chunks: Iterable[tuple[int, int, int]], elems_per_chunk: int, itemsize: int,
               inplace: bool = False, staged: bool = False) -> int:
    """Bytes a call holds: every rank's input, output and scratch buffers (``chunks``: one
    (input, output, scratch) chunk count per rank, of ``elems_per_chunk`` elements; in place
    the input lies in the output), and with ``staged`` the copies a checked run keeps
    besides: the inputs drawn, the expected outputs and the outputs handed back."""
    total = 0
    for i, o, s in chunks:
        total += (max(i, o) if inplace else i + o) + s
        if staged:
            total += i + 2 * o
    return int(total) * int(elems_per_chunk) * int(itemsize)


def amount(nbytes: int) -> str:
    """``1.5 GiB``, ``12.0 MiB`` (one decimal): the units the refusal speaks in."""
    unit, size = ("GiB", 1 << 30) if nbytes >= 1 << 30 else ("MiB", 1 << 20)
    return f"{nbytes / size:.1f} {unit}"


def check_fits(need: int, what: str, available: int | None = None) -> None:
    """A one-line MscclRuntimeError when ``need`` bytes exceed what the machine has free
    (``available``, default :func:`available_bytes`)."""
    free = available_bytes() if available is None else available
    if free is None or need <= free:
        return
    raise MscclRuntimeError(f"{what} needs about {amount(need)} of memory and the machine has "
                            f"{amount(free)} free (MemAvailable): refused before allocating; "
                            f"give a smaller size or fewer ranks")
