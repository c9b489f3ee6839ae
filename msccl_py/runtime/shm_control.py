"""The shm arena's control words by name: the abort record, each rank's call words, descriptors.

The control area is shared ``int64`` words (:class:`~.shm_arena.Layout`
says where each one lives); every word has one writer and is read by the
other ranks, so what the words mean is a protocol between processes.
:class:`ControlWords` gives them names and keeps the order of stores the
protocol relies on (a record's fields before the word that publishes it). It
is a view: it copies nothing, and the executors' hot loops still index
``words`` directly with word numbers they looked up once.

A rank entering a call publishes a :class:`CallDescriptor` (collective,
size, dtype, op, root, program) in its slot; peers compare it with their own
before the first transfer, so mismatched calls fail instead of exchanging
wrong data. :func:`describe` is the text every mismatch message uses.

>>> describe(CallDescriptor(COLLECTIVES.index("allreduce"), 1024, 1, 0, 0, 0xab))
'allreduce(count=1024, dtype=float32, op=sum, program#ab)'
"""

from __future__ import annotations

from typing import NamedTuple

from msccl_py.plan.contract import CALL_COLLECTIVES, CALL_DTYPES, OPS, describe_call
from msccl_py.transport import shm_arena as A

#: descriptor codes: a descriptor stores the index of its collective, dtype and op in the
#: contract's tables
COLLECTIVES, DTYPES = CALL_COLLECTIVES, CALL_DTYPES

#: the abort record, the first words of the arena: the first failure's code
#: (``A.ABORT_*``; 0 while none), the rank it came from, its message's length in bytes
ABORT_CODE, ABORT_ORIGIN, ABORT_LENGTH = 0, 1, 2
#: a descriptor slot (``Layout.desc_word``) holds the call's sequence number, then the fields
DESC_SEQ = 0
DESC_FIELDS = 7


class CallDescriptor(NamedTuple):
    """What a rank says it is calling; peers must call the same (compared as a tuple)."""

    collective: int      # index in COLLECTIVES
    count: int
    dtype: int           # index in DTYPES
    op: int              # index in OPS
    root: int
    program: int         # key of the program the call runs
    spare: int = 0       # always 0 (the slot's last word)


def bit(rank: int) -> int:
    """The bit of ``rank`` in a sleep mask (ranks past 62 share the last bit)."""
    return 1 << min(rank, 62)


def describe(desc: tuple[int, ...]) -> str:
    """Human text of a call descriptor (a :class:`CallDescriptor` or its 7 ints)."""
    return describe_call(desc)


class ControlWords:
    """Named reads and writes of an arena's control words (``words``: the int64 view).

    >>> import array
    >>> layout = A.Layout(world_size=2, buffsize=1 << 12)
    >>> ctl = ControlWords(memoryview(array.array("q", bytes(layout.control_bytes))), layout)
    >>> ctl.publish(1, 3, CallDescriptor(1, 8, 1, 0, 0, 7))
    >>> ctl.seq(1), ctl.descriptor(1, 3), ctl.descriptor(1, 4)
    (3, (1, 8, 1, 0, 0, 7, 0), None)
    """

    __slots__ = ("_desc0", "_done", "_seq", "_sleep", "layout", "records", "words")

    def __init__(self, words: memoryview, layout: A.Layout, records: list[int] | None = None):
        self.words = words
        self.layout = layout
        # each rank's record as this rank reads it (a peer on another host: its mirror);
        # word numbers looked up once: a call's rendezvous reads them several times
        self.records = recs = records or [layout.record(p) for p in range(layout.world_size)]
        self._seq = [r + A.REC_SEQ for r in recs]
        self._done = [r + A.REC_DONE for r in recs]
        self._sleep = [r + A.REC_SLEEP for r in recs]
        self._desc0 = [r + A.LINE for r in recs]

    # ----- the abort record --------------------------------------------------------------
    @property
    def abort_code(self) -> int:
        """The group's first failure (``A.ABORT_*``), 0 while there is none."""
        return self.words[ABORT_CODE]

    def abort_record(self) -> tuple[int, int, int]:
        """(code, origin rank, message length)."""
        w = self.words
        return int(w[ABORT_CODE]), int(w[ABORT_ORIGIN]), int(w[ABORT_LENGTH])

    def set_abort(self, code: int, origin: int, length: int) -> None:
        """Record a failure; the code goes last, as it is what other ranks poll."""
        w = self.words
        w[ABORT_LENGTH] = length
        w[ABORT_ORIGIN] = origin
        w[ABORT_CODE] = code

    # ----- one rank's words --------------------------------------------------------------
    def set_pid(self, rank: int, pid: int) -> None:
        self.words[self.layout.pid_word(rank)] = pid

    def seq(self, rank: int) -> int:
        """How many calls ``rank`` has entered."""
        return self.words[self._seq[rank]]

    def done(self, rank: int) -> int:
        """Nonzero once ``rank`` enters no more calls."""
        return self.words[self._done[rank]]

    def set_done(self, rank: int) -> None:
        self.words[self._done[rank]] = 1

    def sleep_word(self, rank: int) -> int:
        """The word of ``rank``'s sleep mask (for loops that poll it)."""
        return self._sleep[rank]

    def sleep_mask(self, rank: int) -> int:
        """The peers (:func:`bit`) whose progress ``rank`` sleeps waiting for; 0 while it runs."""
        return self.words[self._sleep[rank]]

    def set_report_length(self, rank: int, length: int) -> None:
        self.words[self.layout.report_len_word(rank)] = length

    # ----- call descriptors --------------------------------------------------------------
    def publish(self, rank: int, seq: int, desc: tuple[int, ...]) -> None:
        """Enter call ``seq`` as ``rank`` with ``desc``: the fields, then the slot's sequence
        number, then the rank's call count, so a reader that sees the count sees the fields."""
        w = self.words
        base = self._desc0[rank] + (seq % A.HIST) * A.DESC_WORDS
        for j in range(DESC_FIELDS):
            w[base + 1 + j] = desc[j]
        w[base + DESC_SEQ] = seq
        w[self._seq[rank]] = seq

    def descriptor(self, rank: int, seq: int) -> tuple[int, ...] | None:
        """``rank``'s descriptor of call ``seq`` (the :class:`CallDescriptor` fields as a
        plain tuple, what :meth:`publish` was given); None when its slot holds another call."""
        w = self.words
        base = self._desc0[rank] + (seq % A.HIST) * A.DESC_WORDS
        if w[base + DESC_SEQ] != seq:
            return None
        return tuple(w[base + 1:base + 1 + DESC_FIELDS])
