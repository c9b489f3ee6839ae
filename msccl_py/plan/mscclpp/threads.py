"""What the MSCCL++ executor runs on every thread of a block, and what on a few.

The executor (``src/core/include/execution_kernel.hpp``) runs a threadblock's
operations in order on all of its threads, but not every operation uses them
all:

- **all threads** (``ALL``): data operations stripe their range over the
  block, ``idx = threadIdx.x; idx < n; idx += blockDim.x`` (``copy``, ``put``,
  ``get``, the reductions, the LL packet operations, the NVLS operations). A
  thread moves only its own slices.
- **a few threads** (``LEAD``): ``signal``, ``wait``, ``flush``, their relaxed
  forms and ``sem_acquire``/``sem_release`` run on ``threadIdx.x < n`` (one
  thread per channel or semaphore); a put on a port channel posts one proxy
  request per channel the same way. The other threads go straight on to the
  next operation.
- **block barriers** (``SYNC``): ``nop`` is ``__syncthreads()``; ``barrier``
  is ``__syncthreads()``, thread 0 meeting the other blocks (``DeviceSyncer``
  in ``include/mscclpp/concurrency_device.hpp``), then ``__syncthreads()``.

So a signal after a copy publishes only thread 0's slices unless a ``nop``
separates them, and a copy after a wait may read before the wait returns
unless a ``nop`` separates them. ``rppkt`` on a port channel reads its
packets with every thread, synchronises the block, then posts the put from a
few threads (:data:`SPLIT`).

>>> from msccl_py.mscclpp_ir import Op
>>> kind(Op("copy")), kind(Op("signal")), kind(Op("put", channel_type="port")), kind(Op("nop"))
('all', 'lead', 'lead', 'sync')
"""

from __future__ import annotations

from msccl_py.mscclpp_ir import Op

ALL, LEAD, SYNC = "all", "lead", "sync"

#: run on threadIdx.x < (channels or semaphores of the operation)
LEAD_OPS = frozenset({"signal", "wait", "rlxsignal", "rlxwait", "flush", "sem_acquire", "sem_release"})
#: posted to the proxy by threadIdx.x < channels when on a port channel, else copied by every thread
PORT_POSTED = frozenset({"put", "pws", "pwsf", "ppkt"})
#: every thread reads the packets, the block synchronises, a few threads post the put (port channel)
SPLIT = "rppkt"
#: lead operations after which the block knows more (another block or rank came first)
RECEIVES = frozenset({"wait", "rlxwait", "sem_acquire"})
#: lead operations that tell another block or rank what this block did so far
PUBLISHES = frozenset({"signal", "rlxsignal", "sem_release", "pws", "pwsf", "put", "ppkt", "flush"})


def kind(op: Op) -> str:
    """``all``, ``lead`` or ``sync``: which of the block's threads run ``op`` (port ``rppkt``: ``all``)."""
    if op.name in ("nop", "barrier"):
        return SYNC
    if op.name in LEAD_OPS or (op.name in PORT_POSTED and op.channel_type == "port"):
        return LEAD
    return ALL
