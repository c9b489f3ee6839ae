"""Per-size results and nccl-tests' size, algbw and busbw definitions.

nccl-tests (``doc/PERFORMANCE.md``) reports ``size`` (bytes per rank as the
collective counts them: the output for allgather, the input for
reduce_scatter), ``algbw = size / time`` and ``busbw = algbw x factor`` with
factor ``2(n-1)/n`` for allreduce, ``(n-1)/n`` for allgather, reduce_scatter,
alltoall, gather and scatter, and 1 for broadcast and reduce. GB/s are 1e9
bytes per second.

>>> busbw_factor("allreduce", 8)
1.75
>>> parse_sizes("1KiB:8KiB")
[1024, 2048, 4096, 8192]
>>> parse_sizes("1MiB,64MiB")
[1048576, 67108864]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from msccl_py.collective_table import KINDS
from msccl_py.errors import SizeError
from msccl_py.plan.sizes import parse_size

#: the keys ``--json`` prints, in order
JSON_KEYS = ("bytes", "time_us", "algbw_GBps", "busbw_GBps", "bottleneck")


@dataclass(frozen=True)
class Result:
    """One size: nccl-tests' ``bytes``, time, algbw, busbw, and what bounds the time.

    ``bottleneck`` names a resource that runs full (``link 0->1 (nvlink)``,
    ``switch nvswitch port 3 out``, ``nic ib0 in``),
    ``threadblock rank R tb T`` (one threadblock's work is the critical path)
    or ``latency: H sequential hops``. ``iterations`` is the pipeline
    iterations of the call, ``utilization`` the busiest resource's busy share.
    """

    bytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    bottleneck: str
    protocol: str
    iterations: int
    utilization: float

    def as_dict(self) -> dict:
        """The JSON object of ``--json`` (keys :data:`JSON_KEYS`)."""
        d = asdict(self)
        return {k: d[k] for k in JSON_KEYS}


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' busbw / algbw for ``collective`` on ``nranks`` ranks."""
    found = KINDS.get(collective)
    return found.busbw_factor(nranks) if found is not None else 1.0


def parse_sizes(spec: str | int | list) -> list[int]:
    """Sizes of ``spec``: a comma list, or ``LO:HI`` doubling from LO up to HI."""
    if isinstance(spec, int):
        return [spec]
    if isinstance(spec, (list, tuple)):
        return [parse_size(s) for s in spec]
    out: list[int] = []
    for part in str(spec).split(","):
        part = part.strip()
        if ":" in part:
            lo_text, hi_text = part.split(":", 1)
            lo, hi = parse_size(lo_text), parse_size(hi_text)
            if lo <= 0 or hi < lo:
                raise SizeError(f"size range {part!r} must go up from a positive size")
            size = lo
            while size <= hi:
                out.append(size)
                size *= 2
        elif part:
            out.append(parse_size(part))
    if not out or min(out) <= 0:
        raise SizeError(f"no positive sizes in {spec!r}; use e.g. 1KiB:4GiB or 1MiB,64MiB")
    return out
