"""A human-readable overview of an algorithm, as ``msccl-py info`` prints it.

Per rank: threadblocks, steps and XML steps (nops included), chunk counts;
then whether the algorithm fits each runtime's limits.
"""

from __future__ import annotations

from msccl_py import ir
from msccl_py.errors import XmlError
from msccl_py.targets.msccl.dialects import DIALECTS, check_limits, xml_step_count


def headline(alg: ir.Algorithm) -> str:
    """The first line of :func:`summary`: name, collective, ranks, protocol, channels, chunks.

    >>> headline(ir.Algorithm("a", "allreduce", "LL", True, 1, 1, 1, gpus=[ir.Gpu(0, 1, 0)]))
    'a: allreduce, 1 ranks, protocol LL, 1 channels, 1 chunks per loop'
    """
    return (f"{alg.name}: {alg.collective}, {alg.ngpus} ranks, protocol {alg.protocol}, "
            f"{alg.nchannels} channels, {alg.nchunksperloop} chunks per loop")


def summary(alg: ir.Algorithm, not_loaded: dict[str, str] | None = None) -> str:
    """Human-readable overview of ``alg`` for ``msccl-py info`` (``not_loaded``: target ->
    why that runtime would refuse the file at load, from :mod:`.names`).

    >>> alg = ir.Algorithm("a", "allreduce", "LL", True, 1, 1, 1, gpus=[ir.Gpu(0, 1, 0)])
    >>> print(summary(alg).splitlines()[0])
    a: allreduce, 1 ranks, protocol LL, 1 channels, 1 chunks per loop
    """
    mode = "/".join(m for m, on in (("in-place", alg.inplace), ("out-of-place", alg.outofplace))
                    if on) or "neither in-place nor out-of-place"
    hi = "unbounded" if not alg.max_bytes else f"{alg.max_bytes} B"
    ops: dict[str, int] = {}
    for _, tb in alg.threadblocks():
        for step in tb.steps:
            ops[step.op] = ops.get(step.op, 0) + 1
    lines = [headline(alg),
             f"  {mode}; sizes {alg.min_bytes} B .. {hi}",
             "  ops: " + (", ".join(f"{op} {n}" for op, n in sorted(ops.items())) or "none"),
             "  rank  tbs  steps  xml-steps  max/tb  i_chunks  o_chunks  s_chunks"]
    total_tbs = total_steps = total_xml = 0
    for gpu in alg.gpus:
        steps = sum(len(tb.steps) for tb in gpu.threadblocks)
        xml_steps = [xml_step_count(tb) for tb in gpu.threadblocks]
        total_tbs += len(gpu.threadblocks)
        total_steps += steps
        total_xml += sum(xml_steps)
        lines.append(f"  {gpu.rank:>4}  {len(gpu.threadblocks):>3}  {steps:>5}  "
                     f"{sum(xml_steps):>9}  {max(xml_steps, default=0):>6}  "
                     f"{gpu.input_chunks:>8}  {gpu.output_chunks:>8}  {gpu.scratch_chunks:>8}")
    lines.append(f"  total: {total_tbs} threadblocks, {total_steps} steps, {total_xml} XML steps "
                 f"with nops")
    for name in DIALECTS:
        if name in (not_loaded or {}):
            lines.append(f"  target {name}: not loaded: {not_loaded[name]}")
            continue
        try:
            check_limits(alg, name)
        except XmlError as exc:
            lines.append(f"  target {name}: exceeds limits: {exc}")
        else:
            lines.append(f"  target {name}: within limits")
    return "\n".join(lines)
