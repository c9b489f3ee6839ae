"""Byte geometry of an MSCCL++ plan at one message size, as the executor computes it.

The message size is the one the executor checks against
``min_message_size``/``max_message_size``: the input size per rank, or the
output size for allgather. Every buffer is cut into chunks of one common
size; a threadblock group splits an operation's range into aligned shares;
a pipeline runs its inner operations on ``unit_size``-byte slices.

>>> from msccl_py.mscclpp_ir import Plan, Gpu
>>> p = Plan("p", "allreduce", "allreduce", "Simple", True, [Gpu(0, 4, 4, 0), Gpu(1, 4, 4, 0)])
>>> g = geometry(p, 1024)
>>> g.chunk, g.sizes[0]
(256, {'i': 1024, 'o': 1024, 's': 0})
>>> group_share(256, 1, 3, 16)
(96, 80)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from msccl_py.errors import SizeError
from msccl_py.mscclpp_ir import Plan


@dataclass(frozen=True)
class Geometry:
    nbytes: int
    chunk: int                       # bytes per chunk, every buffer of every rank
    sizes: list[dict[str, int]]      # per rank: buffer code -> bytes


def plan_chunks(plan: Plan) -> int:
    """How many chunks the message size is cut into (from rank 0, as the executor does per rank)."""
    g = plan.gpus[0]
    if plan.collective == "allgather" and g.output_chunks:
        return g.output_chunks
    return g.input_chunks or g.output_chunks


#: how the input and output sizes of a call follow from its message size, per collective
_SCALE = {"allgather": (1, 0), "reduce_scatter": (0, 1)}     # (input divided by ranks, output divided)


def message_quantum(plan: Plan) -> int:
    """The executor runs ``plan`` at exactly the message sizes that are multiples of this (in range).

    ``checkMessageSize`` (``execution_plan.cc``) wants the input and the output
    size each to be a multiple of ``buffer_alignment`` times the buffer's chunks;
    for allgather the input is the message over the ranks, for reducescatter the
    output is. Other collectives' buffers are sized by the plan's chunk count.

    >>> from msccl_py.mscclpp_ir import Plan, Gpu
    >>> message_quantum(Plan("p", "allgather", "allgather", "Simple", False, [Gpu(0, 7, 56, 0)] * 8))
    896
    """
    a = plan.buffer_alignment
    g = plan.gpus[0]
    if plan.collective not in ("allreduce", "allgather", "reduce_scatter", "alltoall", "sendrecv"):
        return a * max(plan_chunks(plan), 1)
    div_in, div_out = _SCALE.get(plan.collective, (0, 0))
    n = plan.nranks
    quantum = 1
    for chunks, divided in ((g.input_chunks, div_in), (g.output_chunks, div_out)):
        if chunks:
            quantum = math.lcm(quantum, a * chunks * (n if divided else 1))
    return quantum


def size_rule(plan: Plan) -> str:
    """The message sizes the executor runs ``plan`` at, in words (for notes and errors)."""
    q = message_quantum(plan)
    low, high = plan.min_message_size, plan.max_message_size
    span = "" if low == 0 and high == 2**64 - 1 else f" from {low} B" + (
        "" if high == 2**64 - 1 else f" to {high} B")
    return f"multiples of {q} B{span}"


def runs_powers_of_two(plan: Plan, smallest: int = 1 << 20) -> bool:
    """Whether the executor runs ``plan`` at every power-of-two message size from ``smallest`` up
    (to its largest accepted size)."""
    return smallest % message_quantum(plan) == 0 and plan.min_message_size <= smallest <= plan.max_message_size


def geometry(plan: Plan, nbytes: int) -> Geometry:
    """The chunk size and buffer sizes for a call of ``nbytes``; SizeError when the executor refuses it."""
    if not plan.gpus:
        raise SizeError("the plan has no gpus")
    a = plan.buffer_alignment
    n = plan_chunks(plan)
    if n == 0:       # a synchronisation-only plan: no buffer to size
        return Geometry(nbytes, 0, [{"i": 0, "o": 0, "s": 0} for _ in plan.gpus])
    q = message_quantum(plan)
    if nbytes % q:
        near = " or ".join(f"{x} B" for x in (nbytes // q * q, nbytes // q * q + q) if x)
        raise SizeError(f"{nbytes} bytes is not a size this plan runs at: the executor runs it at "
                        f"{size_rule(plan)} ({n} chunks of {a}-byte units), e.g. {near}")
    if not plan.min_message_size <= nbytes <= plan.max_message_size:
        raise SizeError(f"{nbytes} bytes is outside the plan's message sizes "
                        f"[{plan.min_message_size}, {plan.max_message_size}]")
    c = nbytes // n
    sizes = [{"i": g.input_chunks * c, "o": g.output_chunks * c, "s": g.scratch_chunks * c}
             for g in plan.gpus]
    return Geometry(nbytes, c, sizes)


def buffer_views(plan: Plan, rank: int, sizes: dict[str, int], itemsize: int):
    """Rank ``rank``'s memory in elements: (bases, views).

    ``bases`` maps each buffer that has its own memory (``i``, ``o``, ``s``)
    to its element count; ``views`` maps ``i``, ``o`` and ``s`` to
    ``(base, element offset, elements)``. In-place calls alias as the
    executor does: allgather's input is the rank's slot of the output,
    reduce_scatter's output the rank's slot of the input, and equal sizes
    share one buffer.

    >>> from msccl_py.mscclpp_ir import Gpu
    >>> p = Plan("p", "allgather", "allgather", "Simple", True, [Gpu(0, 1, 2, 0), Gpu(1, 1, 2, 0)])
    >>> buffer_views(p, 1, {"i": 64, "o": 128, "s": 0}, 4)[1]["i"]
    ('o', 16, 16)
    """
    ni, no, ns = sizes["i"] // itemsize, sizes["o"] // itemsize, sizes["s"] // itemsize
    r = rank
    views = {"s": ("s", 0, ns)}
    if plan.inplace and plan.collective == "allgather" and no == ni * plan.nranks:
        bases = {"s": ns, "o": no}
        views.update(o=("o", 0, no), i=("o", r * ni, ni))
    elif plan.inplace and plan.collective == "reduce_scatter" and ni == no * plan.nranks:
        bases = {"s": ns, "i": ni}
        views.update(i=("i", 0, ni), o=("i", r * no, no))
    elif plan.inplace and ni == no:
        bases = {"s": ns, "i": ni}
        views.update(i=("i", 0, ni), o=("i", 0, ni))
    else:
        bases = {"s": ns, "i": ni, "o": no}
        views.update(i=("i", 0, ni), o=("o", 0, no))
    return bases, views


def group_share(size: int, index: int, slices: int, alignment: int) -> tuple[int, int]:
    """(offset, size) in bytes of member ``index`` of a ``slices``-threadblock group over ``size`` bytes."""
    def start(k: int) -> int:
        units, rest = divmod(size // alignment, slices)
        return (k * units + min(k, rest)) * alignment
    return start(index), start(index + 1) - start(index)


def pipeline_iterations(num_chunks: int, chunk: int, unit_size: int) -> int:
    return -(-num_chunks * chunk // unit_size)


def smallest_size(plan: Plan) -> int:
    """The smallest size the plan accepts where every threadblock-group member has data.

    Each chunk gets at least 4 alignment units, and at least one per member of
    the largest threadblock group (smaller shares would be empty).
    """
    n = max(plan_chunks(plan), 1)
    step = n * plan.buffer_alignment
    groups = [op.tbg[1] for g in plan.gpus for tb in g.threadblocks for top in tb.ops
              for op in [top] + top.ops if op.tbg is not None]
    size = max([4] + groups) * step
    if size < plan.min_message_size:
        size = -(-plan.min_message_size // step) * step
    return size


def pipeline_size(plan: Plan) -> int | None:
    """A message size at which every pipeline in the plan runs at least two iterations, if any."""
    per_chunk = [op.unit_size // max(op.num_chunks, 1) for g in plan.gpus for tb in g.threadblocks
                 for op in tb.ops if op.name == "pipeline"]
    if not per_chunk:
        return None
    n = max(plan_chunks(plan), 1)
    a = plan.buffer_alignment
    chunk = (max(per_chunk) // a + 1) * a
    size = chunk * n
    size = max(size, smallest_size(plan))
    return size if size <= plan.max_message_size else None
