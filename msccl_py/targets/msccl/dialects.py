"""The MSCCL runtimes the XML targets (dialects), their limits, and the check against them.

Three runtimes load MSCCL XML and each refuses (or silently mis-executes) a
program past its fixed-size tables. The numbers are data here so the writer,
the verifier and the CLI agree on them.

>>> DIALECTS["msccl-executor"].max_steps_per_tb
64
>>> DIALECTS["msccl"].coll_name("reduce_scatter")
'reduce_scatter'
"""

from __future__ import annotations

from dataclasses import dataclass

from msccl_py import ir
from msccl_py.collective_table import NAMES, having
from msccl_py.errors import LimitError, XmlError
from msccl_py.plan.geometry import MAX_COUNT
from msccl_py.plan.reductions import MAX_REDUCE_SOURCES, fused_reductions

#: ``maxBytes`` written for an unbounded algorithm (IR ``max_bytes == 0``): 1 TiB. The
#: oldest runtime reads ``maxBytes="0"`` as "select for 0-byte calls only", so an
#: explicit bound is written; the reader maps any ``maxBytes`` at or above it back to 0.
MAX_BYTES_UNBOUNDED = 1 << 40

#: what every runtime reads; msccl-executor added gather and scatter, and dropped custom
_EXECUTOR = having("since_executor")
_COMMON = frozenset(NAMES) - _EXECUTOR - {"custom"}


@dataclass(frozen=True)
class Dialect:
    """One runtime's XML spelling and table sizes.

    ``max_steps_per_tb`` counts XML steps, ``nop`` included, because the
    runtimes bound the ``s`` attribute, not the executed instructions.
    """

    name: str
    max_steps_per_tb: int
    max_tbs_per_gpu: int
    max_channels: int
    collectives: frozenset[str]
    reduce_scatter_spelling: str
    max_count: int = MAX_COUNT
    max_reduce_sources: int = MAX_REDUCE_SOURCES

    def coll_name(self, collective: str) -> str:
        """How this runtime spells IR collective ``collective`` in ``coll``."""
        return self.reduce_scatter_spelling if collective == "reduce_scatter" else collective


DIALECTS: dict[str, Dialect] = {
    # microsoft/msccl (NCCL 2.12 based): the original format
    "msccl": Dialect("msccl", max_steps_per_tb=256, max_tbs_per_gpu=216, max_channels=32,
                     collectives=_COMMON | {"custom"}, reduce_scatter_spelling="reduce_scatter"),
    # Azure/msccl-executor-nccl
    "msccl-executor": Dialect("msccl-executor", max_steps_per_tb=64, max_tbs_per_gpu=1024,
                              max_channels=32, collectives=_COMMON | _EXECUTOR,
                              reduce_scatter_spelling="reducescatter"),
    # ROCm/rccl's MSCCL path
    "rccl": Dialect("rccl", max_steps_per_tb=64, max_tbs_per_gpu=64, max_channels=128,
                    collectives=_COMMON | _EXECUTOR,
                    reduce_scatter_spelling="reducescatter"),
}


def get_dialect(target: str | Dialect) -> Dialect:
    """The :class:`Dialect` named ``target`` (a Dialect passes through).

    >>> get_dialect("rccl").max_channels
    128
    """
    if isinstance(target, Dialect):
        return target
    try:
        return DIALECTS[target]
    except (KeyError, TypeError):
        raise XmlError(f"unknown XML target {target!r}; choose one of "
                       f"{', '.join(DIALECTS)}") from None


def xml_step_count(tb: ir.Threadblock) -> int:
    """Number of XML steps ``tb`` is written as: its steps plus one nop per extra dependency.

    >>> xml_step_count(ir.Threadblock(0, steps=[ir.Step("copy", depends=[(1, 0), (2, 0)])]))
    2
    """
    return len(tb.steps) + sum(len(st.depends) - 1 for st in tb.steps if len(st.depends) > 1)


def check_limits(alg: ir.Algorithm, target: str | Dialect = "msccl-executor") -> None:
    """Raise :class:`LimitError` naming the GPU/threadblock where ``alg`` exceeds ``target``.

    Checks the collective's support, ``nchannels`` and every channel, the
    threadblocks per GPU, the XML steps per threadblock (nops included), each
    step's count and the size of every fused reduction.

    >>> alg = ir.Algorithm("a", "allreduce", "Simple", True, 2, 2, nchannels=40)
    >>> check_limits(alg, "msccl")
    Traceback (most recent call last):
    ...
    msccl_py.errors.LimitError: algorithm uses 40 channels; target msccl allows at most 32
    """
    d = get_dialect(target)
    if alg.collective not in d.collectives:
        raise LimitError(f"target {d.name} does not run collective {alg.collective!r}; it runs "
                         f"{', '.join(sorted(d.collectives))}")
    if alg.nchannels > d.max_channels:
        raise LimitError(f"algorithm uses {alg.nchannels} channels; target {d.name} allows at "
                         f"most {d.max_channels}")
    for gpu in alg.gpus:
        if len(gpu.threadblocks) > d.max_tbs_per_gpu:
            raise LimitError(f"gpu {gpu.rank} has {len(gpu.threadblocks)} threadblocks; target "
                             f"{d.name} allows at most {d.max_tbs_per_gpu}")
        max_count = d.max_count
        for tb in gpu.threadblocks:
            if not 0 <= tb.channel < d.max_channels:
                raise LimitError(f"{where(gpu, tb)} uses channel {tb.channel}; target "
                                 f"{d.name} allows channels 0..{d.max_channels - 1}")
            steps = tb.steps
            # whole-list passes (C loops): one nop per dependency past a step's first
            ndeps = list(map(len, [step.depends for step in steps]))
            n = len(steps) + sum(ndeps) - len(ndeps) + ndeps.count(0)
            counts = [step.count for step in steps]
            bad_count = -1
            if counts and (min(counts) < 0 or max(counts) >= max_count):
                bad_count = next(k for k, c in enumerate(counts) if not 0 <= c < max_count)
            has_reduce = "reduce" in [step.op for step in steps]
            if n > d.max_steps_per_tb:
                raise LimitError(f"{where(gpu, tb)} has {n} steps (nops included); target "
                                 f"{d.name} allows at most {d.max_steps_per_tb}")
            if bad_count >= 0:
                raise LimitError(f"{where(gpu, tb)} step {bad_count} has count "
                                 f"{steps[bad_count].count}; target {d.name} needs "
                                 f"0 <= count < {max_count}")
            if not has_reduce:
                continue
            for first, n in fused_reductions(tb):
                if n > d.max_reduce_sources:
                    raise LimitError(f"{where(gpu, tb)} steps {first}..{first + n - 1} fuse "
                                     f"into one reduction of {n} sources; target {d.name} "
                                     f"allows at most {d.max_reduce_sources}")


def where(gpu: ir.Gpu, tb: ir.Threadblock) -> str:
    """How error messages name a threadblock (the XML writer's too)."""
    return f"gpu {gpu.rank} threadblock {tb.id}"


#: the dialect written when none is asked for: one the newer runtimes load
DEFAULT_TARGET = "msccl-executor"


def default_target(collective: str) -> str:
    """``DEFAULT_TARGET``, or the first dialect that runs ``collective`` when it does not.

    Only the original runtime runs custom collectives (``ncclCustomCollective``).

    >>> default_target("allreduce"), default_target("custom")
    ('msccl-executor', 'msccl')
    """
    if collective in DIALECTS[DEFAULT_TARGET].collectives:
        return DEFAULT_TARGET
    for d in DIALECTS.values():
        if collective in d.collectives:
            return d.name
    return DEFAULT_TARGET
