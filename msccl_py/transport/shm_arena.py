"""The shared-memory arena of one process group: control words, FIFOs, data buffers.

One anonymous ``memfd`` holds everything the ranks share. It never appears
in ``/dev/shm`` and the kernel frees it when the last process holding it
exits, so a killed rank (or a killed parent) cannot leak a segment. The file
is sized sparsely: FIFOs are reserved for every possible connection
``(channel, sender, receiver)`` but only pages that a program touches use
memory.

Layout (``np.int64`` control words, each hot counter on its own cache line):

* abort record: code, origin rank, message length; message bytes after it;
* per rank: pid, call sequence number, report length, sleep mask, done flag,
  descriptor history (``HIST`` calls);
* per rank: a text area for the wait report written when a call aborts;
* per connection: the sender's ``tail`` and the receiver's ``head`` counters
  (transfers posted / consumed, monotone for the life of the group);
* joined groups only (``joined=True``: ranks started by a launcher, not by
  the group): per (rank, peer on another host) a mirror record shaped like a
  rank's words, kept by the rank's link (:mod:`.shm_link`), so the executors
  read a remote peer's call words where they read a local one's; then the
  ranks' semaphores (each rank's doorbell and its link's) and the group lock,
  as ``sem_t`` in shared memory;
* FIFO bytes: ``buffsize`` per connection;
* data bytes (optional): an input and an output region per rank, used by
  :func:`msccl_py.runtime.shm.run` to hand arrays to the ranks without pickling.

>>> layout = Layout(world_size=2, buffsize=1 << 16)
>>> layout.conn_id(channel=0, sender=1, receiver=0)
2
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

import numpy as np

from msccl_py.errors import MscclRuntimeError, SizeError

MAX_CHANNELS = 32
HIST = 8
DESC_WORDS = 8
LINE = 8                      # int64 words per cache line
MSG_BYTES = 1 << 14
REPORT_BYTES = 1 << 13
PAGE = 1 << 12

#: a rank's words relative to its record (``Layout.record``): pid, call sequence number,
#: report length, sleep mask, done flag; the descriptor history starts one line in
REC_PID, REC_SEQ, REC_REPORT, REC_SLEEP, REC_DONE = range(5)
#: bytes reserved per semaphore (a glibc ``sem_t`` is 32; one cache line each)
SEM_BYTES = 64

#: abort codes (word 0 of the control area)
ABORT_NONE, ABORT_ERROR, ABORT_DEADLOCK, ABORT_DIED, ABORT_MISMATCH, ABORT_CLOSED = range(6)


def _round(n: int, to: int = PAGE) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Layout:
    """Byte and word offsets of everything in the arena (a pure function of its arguments)."""

    world_size: int
    buffsize: int
    data_bytes: int = 0
    joined: bool = False

    @property
    def rank_words(self) -> int:
        return LINE + HIST * DESC_WORDS

    @property
    def nconns(self) -> int:
        return MAX_CHANNELS * self.world_size * self.world_size

    def conn_id(self, channel: int, sender: int, receiver: int) -> int:
        """Global index of the FIFO ``channel: sender -> receiver``."""
        return (channel * self.world_size + sender) * self.world_size + receiver

    # control words
    def record(self, rank: int) -> int:
        """First word of ``rank``'s record (its words at ``REC_*`` offsets, then descriptors)."""
        return LINE + rank * self.rank_words

    def pid_word(self, rank: int) -> int:
        return self.record(rank) + REC_PID

    def seq_word(self, rank: int) -> int:
        return self.record(rank) + REC_SEQ

    def report_len_word(self, rank: int) -> int:
        return self.record(rank) + REC_REPORT

    def sleep_word(self, rank: int) -> int:
        """Mask of the peers a sleeping rank waits on (0 while it runs)."""
        return self.record(rank) + REC_SLEEP

    def done_word(self, rank: int) -> int:
        """Set once the rank's function has returned: it enters no more calls."""
        return self.record(rank) + REC_DONE

    def desc_word(self, rank: int, seq: int) -> int:
        return self.record(rank) + LINE + (seq % HIST) * DESC_WORDS

    def mirror(self, viewer: int, peer: int) -> int:
        """First word of the record ``viewer`` reads for ``peer`` on another host (joined
        groups; its link writes it)."""
        if not self.joined:
            raise MscclRuntimeError("mirror records exist in joined groups only")
        return self.mirrors_word + (viewer * self.world_size + peer) * self.rank_words

    def records(self, viewer: int, remote: frozenset[int] | set[int] = frozenset()) -> list[int]:
        """The record of every rank as ``viewer`` reads it: a mirror for ``remote`` ranks."""
        return [self.mirror(viewer, p) if p in remote else self.record(p)
                for p in range(self.world_size)]

    @property
    def counters_word(self) -> int:
        return LINE + self.world_size * self.rank_words

    def tail_word(self, conn: int) -> int:
        return self.counters_word + conn * 2 * LINE

    def head_word(self, conn: int) -> int:
        return self.counters_word + conn * 2 * LINE + LINE

    @property
    def mirrors_word(self) -> int:
        return self.counters_word + self.nconns * 2 * LINE

    @property
    def control_bytes(self) -> int:
        mirrors = self.world_size * self.world_size * self.rank_words if self.joined else 0
        return _round((self.mirrors_word + mirrors) * 8)

    # byte regions
    @property
    def message_offset(self) -> int:
        return self.control_bytes

    def report_offset(self, rank: int) -> int:
        return self.message_offset + MSG_BYTES + rank * REPORT_BYTES

    @property
    def sems_offset(self) -> int:
        return _round(self.report_offset(self.world_size), SEM_BYTES)

    def sem_offset(self, index: int) -> int:
        """Semaphore ``index`` (joined groups): rank r's doorbell is r, its link's
        ``world_size + r``, the group lock ``2 * world_size``."""
        return self.sems_offset + index * SEM_BYTES

    @property
    def fifo_offset(self) -> int:
        sems = (2 * self.world_size + 1) * SEM_BYTES if self.joined else 0
        return _round(self.sems_offset + sems)

    @property
    def fifo_stride(self) -> int:
        return _round(self.buffsize)

    def fifo(self, conn: int) -> int:
        return self.fifo_offset + conn * self.fifo_stride

    @property
    def data_offset(self) -> int:
        return self.fifo_offset + self.nconns * self.fifo_stride

    @property
    def data_stride(self) -> int:
        return _round(self.data_bytes)

    def data(self, rank: int, which: int) -> int:
        """Byte offset of rank's input (``which=0``) or output (``which=1``) region."""
        return self.data_offset + (2 * rank + which) * self.data_stride

    @property
    def total_bytes(self) -> int:
        return self.data_offset + 2 * self.world_size * self.data_stride


class Arena:
    """One mapping of the group's memfd, with typed views.

    ``Arena.create`` makes the memfd (parent); ``Arena.attach`` maps it in a
    rank, either from an inherited descriptor (fork) or through
    ``/proc/<parent>/fd`` (spawn/forkserver).
    """

    def __init__(self, layout: Layout, fd: int, owner: bool):
        self.layout = layout
        self.fd = fd
        self.owner = owner
        self.map = mmap.mmap(fd, layout.total_bytes, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self._base = memoryview(self.map)
        self._head = self._base[:layout.control_bytes]
        self.words = self._head.cast("q")
        self._addr = np.frombuffer(self.map, dtype=np.uint8, count=1).ctypes.data
        self._fifo_views: dict[tuple[int, str, int], np.ndarray] = {}

    @classmethod
    def create(cls, layout: Layout) -> Arena:
        if layout.world_size < 1:
            raise MscclRuntimeError(f"world size must be at least 1, got {layout.world_size}")
        fd = os.memfd_create("msccl_py", 0)
        try:
            os.ftruncate(fd, layout.total_bytes)
            return cls(layout, fd, owner=True)
        except OSError as exc:
            os.close(fd)
            raise MscclRuntimeError(f"cannot create a {layout.total_bytes}-byte shared arena "
                                    f"for {layout.world_size} ranks: {exc}") from exc

    @classmethod
    def attach(cls, layout: Layout, fd: int, parent_pid: int, inherited: bool) -> Arena:
        if inherited:
            return cls(layout, fd, owner=False)
        own = os.open(f"/proc/{parent_pid}/fd/{fd}", os.O_RDWR)
        try:
            arena = cls(layout, own, owner=False)
        finally:
            os.close(own)
        arena.fd = -1
        return arena

    def fifo_entries(self, conn: int, dtype: np.dtype, entries: int) -> np.ndarray:
        """Connection ``conn``'s FIFO as ``entries`` rows of ``dtype`` (cached)."""
        key = (conn, dtype.str, entries)
        view = self._fifo_views.get(key)
        if view is None:
            stride = self.layout.buffsize // entries // dtype.itemsize
            view = np.frombuffer(self.map, dtype=dtype, count=entries * stride,
                                 offset=self.layout.fifo(conn)).reshape(entries, stride)
            self._fifo_views[key] = view
        return view

    def data_view(self, rank: int, which: int, dtype: np.dtype, count: int) -> np.ndarray:
        """``count`` elements of rank's input (0) or output (1) data region."""
        nbytes = count * dtype.itemsize
        if nbytes > self.layout.data_stride:
            raise SizeError(f"rank {rank}: {nbytes} bytes exceed the runtime's data region of "
                            f"{self.layout.data_stride} bytes per buffer")
        return np.frombuffer(self.map, dtype=dtype, count=count,
                             offset=self.layout.data(rank, which))

    def address(self, offset: int) -> int:
        """The virtual address of byte ``offset`` of this mapping (for ctypes)."""
        return self._addr + offset

    def write_text(self, offset: int, limit: int, text: str) -> int:
        raw = text.encode("utf-8", "replace")[:limit]
        self.map[offset:offset + len(raw)] = raw
        return len(raw)

    def read_text(self, offset: int, length: int) -> str:
        return bytes(self.map[offset:offset + length]).decode("utf-8", "replace")

    def release(self, rank: int, which: int) -> None:
        """Give a data region's pages back to the kernel (its contents become zeros)."""
        start = self.layout.data(rank, which)
        self.map.madvise(mmap.MADV_REMOVE, start, self.layout.data_stride)

    def close(self) -> None:
        self._fifo_views.clear()
        for view in (self.words, self._head, self._base):
            view.release()
        try:
            self.map.close()
        except BufferError:
            pass  # arrays still view the mapping; it goes with them
        if self.owner and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
