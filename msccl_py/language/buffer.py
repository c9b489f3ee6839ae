"""Buffer names and the enums MSCCLang programs import."""

from __future__ import annotations

from enum import Enum


class Buffer(Enum):
    """A rank's buffers. Named scratch buffers are plain strings."""

    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self) -> str:
        return self.value

    def __lt__(self, other: "Buffer") -> bool:
        return self.value < other.value

    # Members are singletons compared by identity; identity hashing is C-fast,
    # and buffers are dict keys on the DSL's hot path (Enum hashes in Python).
    __hash__ = object.__hash__


class ThreadblockPolicy(Enum):
    """``auto``: the compiler picks threadblocks; ``manual``: ``sendtb``/``recvtb`` decide."""

    auto = "auto"
    manual = "manual"


class Instruction(Enum):
    """Threadblock instruction kinds, valued by their XML step type."""

    start = "start"
    send = "s"
    recv = "r"
    recv_copy_send = "rcs"
    recv_reduce_send = "rrs"
    recv_reduce_copy = "rrc"
    recv_reduce_copy_send = "rrcs"
    copy = "cpy"
    reduce = "re"
    delete = "d"
    nop = "nop"

    def __str__(self) -> str:
        return self.value


def buffer_key(buffer: "Buffer | str") -> "Buffer | str":
    """Canonical key of a buffer: the unnamed scratch and the name 'scratch' are one buffer."""
    if buffer is Buffer.scratch:
        return "scratch"
    return buffer


def buffer_label(buffer: "Buffer | str") -> str:
    """How error messages spell a buffer."""
    return buffer.name if isinstance(buffer, Buffer) else f"scratch {buffer!r}"


#: the trace's keys of the two buffers every rank has
TRACE_KEYS = {Buffer.input: "i", Buffer.output: "o"}


def trace_key(buffer) -> object:
    """Trace key of a buffer: ``"i"``, ``"o"`` or ``("s", name)``."""
    key = TRACE_KEYS.get(buffer)
    return key if key is not None else ("s", buffer_key(buffer))
