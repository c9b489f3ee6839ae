"""Threadblock state of one call shape, shared by both shm executors and the stall report.

A call shape (program, chunk size S, dtype) fixes the FIFO geometry and
which control words and FIFO pages each threadblock uses; :func:`call_template`
works that out once and the rank reuses it for every call of the shape, so a
repeated call allocates nothing. The same :class:`TbState` objects carry the
call's progress: the Python executor advances them, the native one writes its
state back into them when a call fails, so :mod:`~msccl_py.runtime.shm_report` describes a
stuck call the same way whichever executor ran it.

>>> from msccl_py.runtime import shm_fallback
>>> from msccl_py.runtime.shm_program import rank_program
>>> arena = A.Arena.create(A.Layout(world_size=2, buffsize=1 << 16))
>>> prog = rank_program(shm_fallback.allreduce_ring(2), 0, world_size=2)
>>> t = call_template(prog, 1024, np.dtype("float32"), arena)
>>> t.iterations, t.fifo_transfers, [(st.speer, st.rpeer) for st in t.tbs]
(1, 2, [(1, 1)])
>>> arena.close()
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.plan.geometry import call_geometry
from msccl_py.transport import shm_arena as A
from msccl_py.runtime.shm_control import ControlWords
from msccl_py.runtime.shm_program import RankProgram, TbProgram

#: what a blocked threadblock waits for (``TbState.wait``; the native executor uses the
#: same codes): nothing, a dependency, a peer to enter the call (receive or send side),
#: data in its receive FIFO, room in its send FIFO
W_NONE, W_DEP, W_ENTER_RECV, W_ENTER_SEND, W_RECV, W_SEND = range(6)


@dataclass(slots=True, eq=False)
class TbState:
    """One threadblock of a call shape: its FIFOs (fixed) and the call's progress (reset
    by every call)."""

    prog: TbProgram
    idx: int                        # index among the rank's threadblocks (dependency flags)
    nsteps: int
    speer: int
    rpeer: int
    stail_w: int                    # control word of the send FIFO's tail (-1: no send peer)
    shead_w: int                    # ... and of its head, which the receiver advances
    sfifo: np.ndarray | None        # the send FIFO's entries, one row per transfer
    rtail_w: int
    rhead_w: int
    rfifo: np.ndarray | None
    ssleep_w: int                   # control word of the send peer's sleep mask (-1: none)
    rsleep_w: int
    it: int = 0                     # iteration
    si: int = 0                     # step
    ti: int = 0                     # transfer within the step
    lo: int = 0                     # first element of the iteration's slice of a chunk
    ln: int = 0                     # the slice's length
    wait: int = W_NONE
    wdep: tuple[int, int] = (0, 0)  # the (threadblock, step) a W_DEP wait is for
    stail: int = 0                  # transfers posted to the send FIFO
    rhead: int = 0                  # transfers consumed from the receive FIFO
    s_ok: bool = False              # the send peer entered this call with our descriptor
    r_ok: bool = False
    views: list | None = None       # one-iteration calls: each transfer's local operands
    fifo_views: list | None = None  # ... and its FIFO entry views


@dataclass(frozen=True, slots=True, eq=False)
class CallTemplate:
    """Geometry (:func:`~msccl_py.plan.geometry.call_geometry`) and threadblocks of one
    call shape."""

    iterations: int
    iter_elems: int                 # L: elements of a chunk one iteration moves
    max_count: int                  # chunks one transfer carries at most
    fifo_transfers: int             # FIFO capacity in transfers
    tbs: list[TbState]


def call_template(prog: RankProgram, S: int, dtype: np.dtype, arena: A.Arena,
                  sleep_words: list[int] | None = None) -> CallTemplate:
    """The template of ``prog`` on chunks of ``S`` elements of ``dtype`` in ``arena``
    (``sleep_words``: each peer's sleep word as the rank reads it; default its own)."""
    lay = arena.layout
    sw = sleep_words or [lay.sleep_word(p) for p in range(lay.world_size)]
    cg = call_geometry(prog.protocol, prog.nchunksperloop, S, dtype.itemsize,
                       buffsize=lay.buffsize)
    cap = cg.fifo_transfers
    tbs = []
    for idx, tb in enumerate(prog.tbs):
        sc, rc = tb.send_conn, tb.recv_conn
        tbs.append(TbState(
            tb, idx, len(tb.steps), tb.send_peer, tb.recv_peer,
            lay.tail_word(sc) if sc >= 0 else -1, lay.head_word(sc) if sc >= 0 else -1,
            arena.fifo_entries(sc, dtype, cap) if sc >= 0 else None,
            lay.tail_word(rc) if rc >= 0 else -1, lay.head_word(rc) if rc >= 0 else -1,
            arena.fifo_entries(rc, dtype, cap) if rc >= 0 else None,
            sw[tb.send_peer] if tb.send_peer >= 0 else -1,
            sw[tb.recv_peer] if tb.recv_peer >= 0 else -1))
    return CallTemplate(cg.iterations, cg.iter_elems, cg.max_allowed_count, cap, tbs)
