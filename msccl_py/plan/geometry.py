"""Protocol geometry: FIFO slots, pipeline iterations and message-size regimes.

One set of functions shared by the verifier and every runtime, so that all of
them agree on how a call of a given size is cut up. The figures follow MSCCL
in NCCL (msccl-executor-nccl ``mscclSetupCount`` and the interpreter kernel):

* A connection's FIFO has ``NCCL_STEPS = 8`` slots of ``buffsize / 8`` bytes.
  Default ``buffsize``: Simple 4 MiB, LL 512 KiB, LL128 4,915,200 B.
* Data bytes per slot: Simple the whole slot, LL half (each 8-byte line
  half carries a flag), LL128 120/128 of it.
* One pipeline iteration moves, per chunk, ``iter_bytes`` = data bytes per slot
  x 4 for Simple (2 slices x 2 slots; NCCL's CHUNKSTEPS) and x 1 for LL/LL128.
  With ``S`` elements per chunk a call runs ``ceil(S / iter_elems)`` iterations,
  iteration ``k`` touching elements ``[k*iter_elems, min((k+1)*iter_elems, S))``
  of every chunk.
* A step of count ``c`` is ``ceil(c / max_allowed_count)`` *transfers* (NCCL
  primitive calls), ``max_allowed_count = clamp(iter_bytes // ceil(nbytes /
  nchunksperloop), 1, 71)``. A transfer occupies 4 slots (Simple) or 1 slot
  (LL, LL128), so a FIFO holds ``fifo_transfers`` = 2 (Simple) or 8 transfers.
* ``nbytes`` is the call's size as NCCL counts it for MSCCL (nccl-tests'
  "size"): ``count * itemsize * mult``, i.e. ``nchunksperloop * S * itemsize``.

Regimes: **small** when every step is a single transfer
(``max_allowed_count >= max step count``), **large** otherwise (the worst
case, one transfer per chunk, is what the verifier models).

>>> g = geometry("Simple")
>>> g.iter_bytes, g.fifo_transfers
(2097152, 2)
>>> g.max_allowed_count(nbytes=8 * 1024, nchunksperloop=8)
71
>>> geometry("LL").iter_bytes
32768
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from msccl_py.errors import SizeError

NCCL_STEPS = 8
#: MSCCL_MAX_COUNT: step counts are < 72; max_allowed_count is capped at 71.
MAX_COUNT = 72
DEFAULT_BUFFSIZE = {"Simple": 1 << 22, "LL": 1 << 19, "LL128": 120 * 640 * NCCL_STEPS * 8}
#: FIFO slots one transfer (one NCCL primitive call) occupies.
SLOTS_PER_TRANSFER = {"Simple": 4, "LL": 1, "LL128": 1}
SMALL, LARGE = "small", "large"
REGIMES = (SMALL, LARGE)


@dataclass(frozen=True)
class Geometry:
    """Slot and iteration sizes of one protocol at one buffer size (bytes)."""

    protocol: str
    buffsize: int
    slot_bytes: int
    slot_data_bytes: int
    iter_bytes: int
    slots_per_transfer: int

    @property
    def fifo_transfers(self) -> int:
        """Transfers a connection's FIFO holds before the sender blocks."""
        return NCCL_STEPS // self.slots_per_transfer

    def iter_elems(self, itemsize: int) -> int:
        """Elements of each chunk one pipeline iteration moves (NCCL's chunkSize)."""
        return max(1, self.iter_bytes // itemsize)

    def iterations(self, chunk_elems: int, itemsize: int) -> int:
        """Pipeline iterations of a call with ``chunk_elems`` elements per chunk."""
        return max(1, math.ceil(chunk_elems / self.iter_elems(itemsize))) if chunk_elems else 0

    def max_allowed_count(self, nbytes: int, nchunksperloop: int) -> int:
        """Chunks one transfer may carry for a call of ``nbytes`` (MSCCL's rule)."""
        per_chunk = max(1, math.ceil(nbytes / nchunksperloop))
        return min(MAX_COUNT - 1, max(1, self.iter_bytes // per_chunk))

    def regime(self, nbytes: int, nchunksperloop: int, max_count: int) -> str:
        """``small`` when a step of ``max_count`` chunks is one transfer at ``nbytes``."""
        return SMALL if self.max_allowed_count(nbytes, nchunksperloop) >= max_count else LARGE

    def small_max_bytes(self, nchunksperloop: int, max_count: int) -> int:
        """Largest ``nbytes`` at which every step of up to ``max_count`` chunks is one transfer.

        0 when no size qualifies (``max_count`` above the runtime's cap).
        """
        if max_count >= MAX_COUNT:
            return 0
        return nchunksperloop * (self.iter_bytes // max(1, max_count))


def geometry(protocol: str, buffsize: int | None = None) -> Geometry:
    """The :class:`Geometry` of ``protocol`` with NCCL's buffer size or ``buffsize`` bytes.

    >>> geometry("LL128").slot_data_bytes
    576000
    """
    if protocol not in DEFAULT_BUFFSIZE:
        raise SizeError(f"unknown protocol {protocol!r}; expected one of "
                        f"{', '.join(DEFAULT_BUFFSIZE)}")
    size = DEFAULT_BUFFSIZE[protocol] if buffsize is None else int(buffsize)
    if size < NCCL_STEPS:
        raise SizeError(f"buffsize {size} is too small: it must hold {NCCL_STEPS} slots")
    slot = size // NCCL_STEPS
    if protocol == "LL":
        data = slot // 2
    elif protocol == "LL128":
        data = slot // 128 * 120
    else:
        data = slot
    steps = 4 if protocol == "Simple" else 1
    return Geometry(protocol, size, slot, data, data * steps, SLOTS_PER_TRANSFER[protocol])


@dataclass(frozen=True)
class CallGeometry:
    """How one call is cut up: chunk length, iterations, transfers per step.

    ``iter_elems`` is the slice of each chunk one iteration moves and
    ``max_allowed_count`` the chunks per transfer.
    """

    chunk_elems: int
    iter_elems: int
    iterations: int
    max_allowed_count: int
    fifo_transfers: int

    def transfers(self, count: int) -> int:
        """Transfers a step of ``count`` chunks makes per iteration (0 for a count-0 step)."""
        return math.ceil(count / self.max_allowed_count) if count > 0 else 0

    def slice(self, iteration: int) -> tuple[int, int]:
        """Element range ``[lo, hi)`` of every chunk that ``iteration`` touches."""
        lo = iteration * self.iter_elems
        return lo, min(lo + self.iter_elems, self.chunk_elems)


def call_geometry(protocol: str, nchunksperloop: int, chunk_elems: int, itemsize: int,
                  buffsize: int | None = None, iter_elems: int | None = None) -> CallGeometry:
    """Geometry of a call with ``chunk_elems`` elements per chunk.

    ``iter_elems`` overrides the protocol's slice length (runtimes use it to
    force many iterations on small data); transfer sizes scale with it.

    >>> cg = call_geometry("Simple", 8, chunk_elems=1 << 20, itemsize=4)
    >>> cg.iter_elems, cg.iterations, cg.max_allowed_count
    (524288, 2, 1)
    """
    g = geometry(protocol, buffsize)
    if chunk_elems < 0 or itemsize <= 0:
        raise SizeError(f"bad call geometry: {chunk_elems} elements per chunk, "
                        f"itemsize {itemsize}")
    step_elems = g.iter_elems(itemsize) if iter_elems is None else int(iter_elems)
    if step_elems <= 0:
        raise SizeError(f"slice length must be positive, got {step_elems}")
    iterations = max(1, math.ceil(chunk_elems / step_elems)) if chunk_elems else 0
    per_chunk = max(1, chunk_elems)
    mac = min(MAX_COUNT - 1, max(1, step_elems // per_chunk))
    return CallGeometry(chunk_elems, step_elems, iterations, mac, g.fifo_transfers)
