"""Choosing the library program for one collective call.

Each operation has a preference list, best first for the regime each
program declares (latency-bound small messages first, bandwidth-bound ones
last). The first program that accepts the rank count and whose declared
size range covers the call wins; when none covers the size, the last (most
general) that accepts the rank count does, so every operation has an answer
for every rank count its general (ring, linear, dissemination) program handles.

>>> choice = select("allreduce", 8, 1 << 30)
>>> choice.name, choice.protocol
('allreduce_ring', 'Simple')
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from msccl_py import ir
from msccl_py.errors import MscclError, ProgramError
from msccl_py.library import registry
from msccl_py.library.spec import OPERATIONS, ProgramSpec

#: operation -> program names, most preferred first
PREFERENCES: dict[str, tuple[str, ...]] = {
    "allreduce": ("allreduce_hierarchical", "allreduce_oneshot", "allreduce_allpairs",
                  "allreduce_recursive_halving_doubling", "allreduce_binomial_tree",
                  "allreduce_ring", "allreduce_rs_ag"),
    "allgather": ("allgather_hierarchical", "allgather_allpairs", "allgather_recursive_doubling",
                  "allgather_ring"),
    "reduce_scatter": ("reduce_scatter_recursive_halving", "reduce_scatter_allpairs",
                       "reduce_scatter_ring"),
    "alltoall": ("alltoall_two_step", "alltoall_allpairs", "alltoall_three_step"),
    "broadcast": ("broadcast_binomial_tree", "broadcast_scatter_allgather", "broadcast_chain"),
    "reduce": ("reduce_binomial_tree", "reduce_rs_gather"),
    "gather": ("gather_binomial", "gather_linear"),
    "scatter": ("scatter_binomial", "scatter_linear"),
    "barrier": ("barrier_dissemination",),
    "alltonext": ("send_to_next_pipeline", "alltonext_forward"),
}

#: operations whose call size as the runtimes count it (the output) is n times the input
GATHERING = ("allgather", "gather")

#: calls at or below this many bytes per rank use the LL protocol when the program allows it
LL_MAX_BYTES = 64 << 10
#: and at or below this LL128, above it Simple
LL128_MAX_BYTES = 1 << 20


@dataclass
class Selection:
    """A program with the arguments to compile it for one call."""

    name: str
    num_ranks: int
    instances: int = 1
    protocol: str = "Simple"
    params: dict[str, Any] = field(default_factory=dict)
    target: str | None = None
    #: why this program: where it stood in the preference order and what was passed over
    reason: str = ""

    def compile(self, cache_dir: str | os.PathLike | None = None) -> ir.Algorithm:
        """Compile (or fetch from the cache) the selected program, fitted to ``target``."""
        from msccl_py.library.build import compile as compile_program
        return compile_program(self.name, self.num_ranks, instances=self.instances,
                               protocol=self.protocol, cache_dir=cache_dir,
                               target=self.target, **self.params)


def _protocol(spec: ProgramSpec, nbytes: int) -> str:
    wanted = ("LL", "LL128", "Simple") if nbytes <= LL_MAX_BYTES else \
        ("LL128", "Simple", "LL") if nbytes <= LL128_MAX_BYTES else ("Simple", "LL128", "LL")
    for proto in wanted:
        if proto in spec.protocols:
            return proto
    return spec.protocol


def _params(spec: ProgramSpec, root: int, gpus_per_node: int | None,
            any_split: bool = False) -> dict[str, Any] | None:
    """Arguments for ``spec`` in this call, or None when it does not apply.

    Hierarchical programs apply only to a known multi-node layout, unless
    ``any_split`` (the last resort) lets them pick their default split.
    """
    names = {p.name for p in spec.params}
    params: dict[str, Any] = {}
    if "root" in names:
        params["root"] = root
    elif root:
        return None
    if spec.hierarchical:
        if gpus_per_node is not None and gpus_per_node >= 2:
            params["gpus_per_node"] = gpus_per_node
        elif not any_split:
            return None
    return params


def _gpus_per_node(topology: Any, num_ranks: int) -> int | None:
    """GPUs per machine of a multi-machine topology whose machines hold equal, consecutive
    rank ranges; None for one machine or an irregular layout."""
    if topology is None:
        return None
    if topology.num_nodes() != num_ranks:
        raise ProgramError(f"select: topology {topology.name!r} has {topology.num_nodes()} "
                           f"ranks but the call has {num_ranks}")
    machines = topology.num_machines
    if machines <= 1:
        return None
    per = num_ranks // machines
    for m in range(machines):
        if list(topology.ranks_of_node(m)) != list(range(m * per, (m + 1) * per)):
            return None
    return per


def candidates(operation: str) -> list[ProgramSpec]:
    """Programs implementing ``operation``, in preference order."""
    if operation not in OPERATIONS:
        raise ProgramError(f"unknown collective {operation!r}; use one of {', '.join(OPERATIONS)}")
    specs = {s.name: s for s in registry.programs() if s.operation == operation}
    order = [specs.pop(n) for n in PREFERENCES.get(operation, ()) if n in specs]
    return order + sorted(specs.values(), key=lambda s: s.name)


def select(collective: str, num_ranks: int, nbytes: int, topology: Any = None, root: int = 0,
           gpus_per_node: int | None = None,
           cache_dir: str | os.PathLike | None = None, target: str | None = None) -> Selection:
    """Pick the program, protocol and parameters for one ``collective`` call.

    ``nbytes`` is the size of each rank's input (``count`` elements × item
    size; the root's for scatter); ``root`` applies to rooted operations
    (broadcast, reduce, gather, scatter); ``gpus_per_node`` (or a
    multi-node ``topology``) enables the hierarchical programs. The choice
    is compiled (and cached) to make sure the verifier's size range
    (``minBytes``/``maxBytes``) admits the call; a program that would risk
    deadlock at this size gives way to the next. With ``target`` (an XML
    dialect) only programs that fit that runtime's limits are picked.

    >>> select("barrier", 6, 0).name
    'barrier_dissemination'
    """
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        raise ProgramError(f"select: rank count must be a positive integer, got {num_ranks!r}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ProgramError(f"select: nbytes must be a non-negative integer, got {nbytes!r}")
    if not 0 <= root < num_ranks:
        raise ProgramError(f"select: root {root} is not a rank of {num_ranks}")
    if gpus_per_node is None:
        gpus_per_node = _gpus_per_node(topology, num_ranks)
    fits = []
    for any_split in (False, True):
        for spec in candidates(collective):
            params = _params(spec, root, gpus_per_node, any_split)
            if params is not None and spec.supports(num_ranks, target, **params):
                fits.append((spec, params))
        if fits:
            break
    if not fits:
        raise ProgramError(f"select: no {collective} program supports {num_ranks} ranks"
                           + (f" with root {root}" if root else ""))
    ordered = [f for f in fits if f[0].covers(nbytes)] + [f for f in reversed(fits)
                                                          if not f[0].covers(nbytes)]
    call_bytes = nbytes * num_ranks if collective in GATHERING else nbytes
    reasons = []
    for spec, params in ordered:
        choice = Selection(spec.name, num_ranks, 1, _protocol(spec, nbytes), params, target)
        try:
            alg = choice.compile(cache_dir)
        except MscclError as exc:  # e.g. past a runtime table size at this rank count
            reasons.append(f"{spec.name}: {exc}")
            continue
        if _safe_at(alg, call_bytes):
            layout = f" in nodes of {params['gpus_per_node']}" if "gpus_per_node" in params \
                else ""
            choice.reason = (f"first of the {collective} preferences that takes {num_ranks} "
                             f"ranks{layout} and declares {nbytes} bytes"
                             if spec.covers(nbytes) else
                             f"no {collective} program that takes {num_ranks} ranks{layout} "
                             f"declares {nbytes} bytes: the most general one")
            if reasons:
                choice.reason += f" (passed over: {'; '.join(reasons)})"
            return choice
        reasons.append(f"{spec.name}: verified for {alg.min_bytes}..{alg.max_bytes or 'any'} "
                       f"bytes only")
    raise ProgramError(f"select: no {collective} program for {num_ranks} ranks works at "
                       f"{nbytes} bytes ({'; '.join(reasons)})")



def _safe_at(alg: ir.Algorithm, call_bytes: int) -> bool:
    """True when the compiled algorithm's verified [minBytes, maxBytes] admits the call."""
    return call_bytes >= alg.min_bytes and (alg.max_bytes == 0 or call_bytes <= alg.max_bytes)
