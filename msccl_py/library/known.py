"""Declarations for program files that do not carry their own.

Keyed by file stem. A file's own ``SPEC``/``SPECS`` or ``@library_program``
always wins. Programs
written as plain MSCCLang scripts (build, ``Check()``, ``XML()`` with no
function returning the program) are run as scripts: ``argv`` turns a
request into the script's command line and the registry takes the program
from its ``XML()`` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from msccl_py.errors import ProgramError
from msccl_py.library.spec import Param, ProgramSpec


@dataclass(frozen=True)
class Known:
    """A declaration plus how to build it when the file's function has another signature.

    ``argv`` (num_ranks, instances, protocol, params) -> script arguments runs
    the file as a script; ``adapter`` (function, num_ranks, instances,
    protocol, params) -> program calls ``spec.build`` differently; neither
    means ``spec.build(num_ranks, instances=, protocol=, **params)``.
    """

    spec: ProgramSpec
    argv: Callable[[int, int, str, dict], list[str]] | None = None
    adapter: Callable | None = None


def _per_node(what: str, local: int = 8):
    def check(num_ranks: int, values: dict) -> str | None:
        if num_ranks % local:
            return f"{what} runs on whole nodes of {local} GPUs; {num_ranks} is not a multiple"
        return None
    return check


def _simple_only(name: str, protocol: str) -> None:
    if protocol != "Simple":
        raise ProgramError(f"{name} is written for the Simple protocol, got {protocol}")


def _by_nodes(function: Callable, num_ranks: int, instances: int, protocol: str, params: dict):
    _simple_only("alltonext_forward", protocol)
    return function(num_ranks // 8, instances)


def _seed_argv(num_ranks: int, instances: int, protocol: str, params: dict) -> list[str]:
    _simple_only("alltonext_backward", protocol)
    return [str(num_ranks // 8), str(instances)]


KNOWN_SPECS: dict[str, list[Known]] = {
    "allreduce_ring": [Known(ProgramSpec(
        "allreduce_ring", "allreduce",
        "ring reduce-scatter + ring allgather, 2(n-1) steps; channels parallel rings",
        build="allreduce_ring",
        params=(Param("channels", int, None, "parallel rings (auto: the fewest that fit the "
                                             "target)", low=1, high=32),
                Param("manual", bool, True, "one threadblock per ring (else automatic)")),
        rank_check=lambda n, v: (f"channels ({v['channels']}) cannot exceed the rank count"
                                 if v["channels"] is not None and v["channels"] > n else None),
        spread="channels",
        protocols=("Simple", "LL128", "LL")))],
    "alltonext_backward": [Known(ProgramSpec(
        "alltonext_backward", "alltonext",
        "the seed: rank r's input to rank r-1, inter-node hops spread over the node's GPUs",
        build="pipeline", min_ranks=8, rank_check=_per_node("alltonext_backward"),
        ranks_note="8k",
        protocols=("Simple",)), argv=_seed_argv)],
    "alltonext_forward": [Known(ProgramSpec(
        "alltonext_forward", "alltonext",
        "mirror of the seed: rank r's input to rank r+1, inter-node hops spread over GPUs",
        build="alltonext_forward", min_ranks=8, rank_check=_per_node("alltonext_forward"),
        ranks_note="8k",
        protocols=("Simple",)), adapter=_by_nodes)],
    "allgather_ring": [Known(ProgramSpec(
        "allgather_ring", "allgather", "ring: every block travels n-1 hops; channels rings",
        build="allgather_ring",
        params=(Param("channels", int, 1, "parallel rings (chunks per rank)", low=1, high=32),
                Param("inplace", bool, False, "input is the rank's block of the output"),
                Param("rings", int, None, "channels each ring's blocks are dealt to by source "
                                          "rank (auto: the fewest that fit the target)",
                      low=1, high=32)),
        rank_check=lambda n, v: (f"rings ({v['rings']}) cannot exceed the rank count"
                                 if v["rings"] is not None and v["rings"] > n else None),
        spread="rings", protocols=("Simple", "LL128", "LL")))],
    "alltoall_allpairs": [Known(ProgramSpec(
        "alltoall_allpairs", "alltoall", "all-pairs: every block straight to its rank",
        build="alltoall_allpairs",
        params=(Param("chunks", int, 1, "chunks per peer block", low=1, high=16),),
        protocols=("Simple", "LL128", "LL"),
        target_max_ranks=(("rccl", 64),)))],  # a threadblock per peer; RCCL runs 64
}
