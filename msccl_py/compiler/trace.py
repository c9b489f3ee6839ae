"""The trace the DSL records: one :class:`Op` per ``copy``/``reduce`` call, plus buffer shapes."""

from __future__ import annotations

from dataclasses import dataclass, field


class Op:
    """One chunk operation: ``dst ← src`` (copy) or ``dst ← dst ⊕ src`` (reduce).

    Buffers are physical keys: ``"i"``, ``"o"`` or a scratch buffer name
    (``("s", name)``). ``file``/``line`` is the user's call site.
    """

    __slots__ = ("kind", "src_rank", "src_buf", "src_idx", "dst_rank", "dst_buf", "dst_idx",
                 "size", "sendtb", "recvtb", "ch", "file", "line", "inst")

    def __init__(self, kind, src_rank, src_buf, src_idx, dst_rank, dst_buf, dst_idx, size,
                 sendtb=-1, recvtb=-1, ch=-1, file=None, line=None, inst=0):
        self.kind = kind
        self.src_rank, self.src_buf, self.src_idx = src_rank, src_buf, src_idx
        self.dst_rank, self.dst_buf, self.dst_idx = dst_rank, dst_buf, dst_idx
        self.size = size
        self.sendtb, self.recvtb, self.ch = sendtb, recvtb, ch
        self.file, self.line = file, line
        self.inst = inst

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "<program>"

    def describe(self) -> str:
        return (f"{self.kind} rank {self.src_rank} {_label(self.src_buf)}[{self.src_idx}] -> "
                f"rank {self.dst_rank} {_label(self.dst_buf)}[{self.dst_idx}] (size {self.size})")


def _label(buf) -> str:
    if buf == "i":
        return "input"
    if buf == "o":
        return "output"
    return f"scratch {buf[1]!r}"


@dataclass
class Trace:
    """Everything the compiler needs from a finished (or in-progress) program."""

    name: str
    collective: str
    num_ranks: int
    inplace: bool
    protocol: str
    instances: int
    manual: bool
    interleaved: bool
    fusion: bool
    input_sizes: list[int]
    output_sizes: list[int]
    #: per rank, scratch buffer name -> base size (chunks), in creation order
    scratch_sizes: list[dict] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
