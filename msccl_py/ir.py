"""The lowered IR: the one interchange format between compiler, XML, verifier and runtimes.

Plain dataclasses with a few queries (slotted, except ``Algorithm``: a
program has hundreds of thousands of steps). ``Step.depends`` entries are
``(threadblock id, step index)`` where the step index is the position in
``Threadblock.steps`` (the IR index). The XML writer inserts ``nop`` steps, so
XML ``s`` indices can be larger; :func:`xml_step_index` maps between the two.
The mapping is monotone, so a runtime comparing IR indices behaves exactly
like the real runtime comparing XML ``s`` values.

>>> step = Step("send", src=Loc("i", 0), dst=Loc("o", 0), count=1)
>>> step.code
's'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from msccl_py import collective_table

INPUT, OUTPUT, SCRATCH = "i", "o", "s"
BUFFERS = (INPUT, OUTPUT, SCRATCH)

#: IR op name -> XML step type.
OP_CODES = {
    "send": "s",
    "recv": "r",
    "recv_copy_send": "rcs",
    "recv_reduce_send": "rrs",
    "recv_reduce_copy": "rrc",
    "recv_reduce_copy_send": "rrcs",
    "copy": "cpy",
    "reduce": "re",
}
#: XML step type -> IR op name (``nop`` is not an IR op).
CODE_OPS = {code: op for op, code in OP_CODES.items()}

SENDS = frozenset({"send", "recv_copy_send", "recv_reduce_send", "recv_reduce_copy_send"})
RECVS = frozenset({"recv", "recv_copy_send", "recv_reduce_send", "recv_reduce_copy",
                   "recv_reduce_copy_send"})
REDUCES = frozenset({"recv_reduce_send", "recv_reduce_copy", "recv_reduce_copy_send", "reduce"})
#: ops that read a local source buffer
READS_SRC = frozenset({"send", "recv_reduce_send", "recv_reduce_copy", "recv_reduce_copy_send",
                       "copy", "reduce"})
#: ops that write a local destination buffer
WRITES_DST = frozenset({"recv", "recv_copy_send", "recv_reduce_copy", "recv_reduce_copy_send",
                        "copy", "reduce"})

#: the collectives (msccl_py.collective_table holds what each one is)
COLLECTIVES = collective_table.NAMES
#: collectives with a root rank (written as the XML attribute ``root``)
ROOTED = collective_table.ROOTED
PROTOCOLS = ("Simple", "LL", "LL128")
_PER_RANK_CHUNKS = collective_table.having("per_rank_chunks")


@dataclass(frozen=True, slots=True)
class Loc:
    """A chunk position in one rank's buffer: buffer ``i``/``o``/``s`` and chunk offset."""

    buffer: str
    offset: int


@dataclass(slots=True)
class Step:
    """One threadblock instruction.

    On ``send``-type steps ``dst`` names the receiver's destination and on
    ``recv``-type steps ``src`` the sender's source; runtimes ignore those,
    verifiers may use them. Either may be ``None`` when unknown.
    """

    op: str
    src: Loc | None = None
    dst: Loc | None = None
    count: int = 1
    depends: list[tuple[int, int]] = field(default_factory=list)
    has_dependents: bool = False

    @property
    def code(self) -> str:
        return OP_CODES[self.op]

    @property
    def is_send(self) -> bool:
        return self.op in SENDS

    @property
    def is_recv(self) -> bool:
        return self.op in RECVS


@dataclass(slots=True)
class Threadblock:
    id: int
    send_peer: int = -1
    recv_peer: int = -1
    channel: int = 0
    steps: list[Step] = field(default_factory=list)


@dataclass(slots=True)
class Gpu:
    rank: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int = 0
    threadblocks: list[Threadblock] = field(default_factory=list)

    def chunks(self, buffer: str) -> int:
        """Number of chunks of ``buffer`` (``i``/``o``/``s``) on this GPU."""
        return {INPUT: self.input_chunks, OUTPUT: self.output_chunks,
                SCRATCH: self.scratch_chunks}[buffer]


@dataclass
class Algorithm:
    name: str
    collective: str
    protocol: str
    inplace: bool
    ngpus: int
    nchunksperloop: int
    nchannels: int
    gpus: list[Gpu] = field(default_factory=list)
    outofplace: bool = True
    min_bytes: int = 0
    max_bytes: int = 0  # 0 = unbounded
    root: int | None = None  # broadcast/reduce/gather/scatter root (XML ``root``; None: 0)

    def threadblocks(self) -> Iterator[tuple[Gpu, Threadblock]]:
        for gpu in self.gpus:
            for tb in gpu.threadblocks:
                yield gpu, tb

    def num_steps(self) -> int:
        return sum(len(tb.steps) for _, tb in self.threadblocks())

    @property
    def chunk_multiplier(self) -> int:
        """The chunk multiplier ``mult``: chunk size S = count*mult/nchunksperloop."""
        return self.ngpus if self.collective in _PER_RANK_CHUNKS else 1


def xml_step_index(tb: Threadblock) -> list[int]:
    """XML ``s`` index of each IR step of ``tb`` once the writer has inserted nops.

    The writer puts one ``nop`` before a step for every dependency past the
    first (the runtime's ``depid/deps`` pair holds one dependency).
    """
    out = []
    s = 0
    for step in tb.steps:
        s += max(0, len(step.depends) - 1)
        out.append(s)
        s += 1
    return out
