"""The MSCCL++ plan IR: a sibling of :mod:`msccl_py.ir`, not an extension of it.

MSCCL++ execution plans are one-sided (a threadblock writes or reads a peer's
buffer through a channel and orders itself with explicit signal/wait,
barriers, semaphores or LL packet flags), whereas ``ir.Algorithm`` is
two-sided (send/recv steps matched over FIFO connections). Folding one into
the other would give every consumer of either a second semantics to guard
against, so plans get their own dataclasses here. The reader
(:mod:`msccl_py.targets.mscclpp.read`) fills them from JSON, the emitter lowers
``ir.Algorithm`` into them, the writer turns them back into JSON, and the
plan verifier and plan runtimes consume only them.

Field meanings follow MSCCL++'s executor (``execution_plan.cc``):

``Plan``
    ``name``; ``collective`` normalised to ``allreduce``, ``allgather``,
    ``reduce_scatter``, ``alltoall``, ``sendrecv`` or the raw string (e.g.
    ``test``) for anything else; ``raw_collective``, the string as written;
    ``protocol`` ``Simple`` or ``LL`` (LL: scratch holds packets, two bytes of
    scratch per data byte); ``inplace``; ``reuse_resources`` (scratch is a
    fixed 64 MiB and scratch chunk offsets wrap); ``num_threads_per_block``;
    ``double_scratch`` (``use_double_scratch_buffer``: each launch uses the
    other half of the scratch); ``buffer_alignment`` (bytes; offsets and sizes
    are multiples of it); ``min_message_size`` / ``max_message_size`` (bytes,
    inclusive, of the input, or of the output for allgather: the size range in
    which the executor selects the plan); ``gpus``, indexed by rank.

``Gpu``
    ``rank``; ``input_chunks`` / ``output_chunks`` / ``scratch_chunks``
    (every buffer is cut into chunks of one common size);
    ``memory_channels`` / ``port_channels``: the peer of each channel, in the
    order the executor creates them (a channel's index in this tuple is its
    rank-level id; the k-th channel of a type from A to B is paired with the
    k-th one from B to A, and a signal on one is seen only by waits on its
    pair); ``switch_channels``: the NVLS groups; ``remote_buffers``: the peer
    buffers this rank may reach, with the channel types that reach them;
    ``semaphores``: initial values of the device semaphores;
    ``threadblocks``.

``Threadblock``
    ``id``; ``ops`` in program order; ``channels`` maps a channel type to the
    rank-level channel ids the threadblock binds (position = the id the
    JSON ops use); ``remote_buffers`` likewise maps the access channel type
    to rank-level remote-buffer ids. Ops below are already resolved through
    these tables; the tables are kept so a plan writes back unchanged.

``Op``
    ``name``: the executor's operation name (``put``, ``pws``, ``pwsf``,
    ``get``, ``copy``, ``signal``, ``wait``, ``rlxsignal``, ``rlxwait``,
    ``flush``, ``re``, ``res``, ``rre``, ``rres``, ``ppkt``, ``rppkt``,
    ``cpkt``, ``upkt``, ``repkt``, ``recpkt``, ``respkt``, ``recspkt``,
    ``glres``, ``gstore``, ``gstorepkt``, ``barrier``, ``nop``,
    ``sem_acquire``, ``sem_release``, ``pipeline``); ``channel_type``
    (``memory``, ``port``, ``switch`` or None); ``channels``: rank-level
    channel ids; ``src`` / ``dst``: :class:`Ref` tuples in JSON order (the
    executor gives position 0 of reduce-type ops to the local operand);
    ``tbg``: (index in group, group size) when the op's byte range is split
    among a threadblock group (each member takes its aligned share);
    ``reduce_op`` as written (the executor takes the call's op instead);
    ``barrier_id`` / ``num_threadblocks`` for ``barrier``; ``semaphores``
    for ``sem_*``; ``unit_size`` (bytes), ``num_chunks`` and ``ops`` for
    ``pipeline`` (the inner ops run once per unit of the ``num_chunks``-chunk
    range, each on the next ``unit_size`` bytes); ``path``: the op's JSON path,
    for messages.

``Ref``
    ``kind``: ``local`` (this rank's buffer), ``remote`` (a peer's buffer
    through a channel) or ``switch`` (the multicast address of an NVLS
    group); ``buffer``: ``i``, ``o`` or ``s``, the buffer actually touched;
    ``index`` / ``size``: first chunk and number of chunks; ``rank``: the
    owner (None for ``switch``); ``remote``: rank-level remote-buffer id;
    ``switch``: rank-level switch-channel id.

>>> p = Plan(name="p", collective="allreduce", raw_collective="allreduce", protocol="Simple",
...          inplace=True, gpus=[])
>>> p.nranks
0
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHANNEL_TYPES = ("memory", "port", "switch")
BUFFERS = ("i", "o", "s")


@dataclass(frozen=True)
class Ref:
    kind: str
    buffer: str
    index: int
    size: int
    rank: int | None = None
    remote: int | None = None
    switch: int | None = None


@dataclass
class Op:
    name: str
    channel_type: str | None = None
    channels: tuple[int, ...] = ()
    src: tuple[Ref, ...] = ()
    dst: tuple[Ref, ...] = ()
    tbg: tuple[int, int] | None = None
    reduce_op: str | None = None
    barrier_id: int | None = None
    num_threadblocks: int | None = None
    semaphores: tuple[int, ...] = ()
    unit_size: int | None = None
    num_chunks: int | None = None
    ops: list[Op] = field(default_factory=list)
    path: str = ""


@dataclass
class Threadblock:
    id: int
    ops: list[Op] = field(default_factory=list)
    channels: dict[str, tuple[int, ...]] = field(default_factory=dict)
    remote_buffers: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class SwitchChannel:
    buffer: str
    ranks: tuple[int, ...]
    nchunks: int


@dataclass(frozen=True)
class RemoteBuffer:
    rank: int
    buffer: str
    access: tuple[str, ...]


@dataclass
class Gpu:
    rank: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    memory_channels: tuple[int, ...] = ()
    port_channels: tuple[int, ...] = ()
    switch_channels: tuple[SwitchChannel, ...] = ()
    remote_buffers: tuple[RemoteBuffer, ...] = ()
    semaphores: tuple[int, ...] = ()
    threadblocks: list[Threadblock] = field(default_factory=list)

    def channel_peers(self, channel_type: str) -> tuple[int, ...]:
        """Peers of this rank's channels of one type, indexed by rank-level channel id."""
        return self.memory_channels if channel_type == "memory" else self.port_channels

    def chunks(self, buffer: str) -> int:
        return {"i": self.input_chunks, "o": self.output_chunks, "s": self.scratch_chunks}[buffer]


@dataclass
class Plan:
    name: str
    collective: str
    raw_collective: str
    protocol: str
    inplace: bool
    gpus: list[Gpu]
    reuse_resources: bool = False
    num_threads_per_block: int = 1024
    double_scratch: bool = False
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = 2**64 - 1

    @property
    def nranks(self) -> int:
        return len(self.gpus)

    @property
    def packets(self) -> bool:
        return self.protocol == "LL"
