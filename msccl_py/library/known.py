"""Declarations for program files that do not carry their own ``SPEC``.

Keyed by file stem. A file's own ``SPEC``/``SPECS`` always wins. Programs
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
    spec: ProgramSpec
    #: (num_ranks, instances, protocol, params) -> script arguments; None = call spec.build
    argv: Callable[[int, int, str, dict], list[str]] | None = None


def _per_node(what: str, local: int = 8):
    def check(num_ranks: int, values: dict) -> str | None:
        if num_ranks % local:
            return f"{what} runs on whole nodes of {local} GPUs; {num_ranks} is not a multiple"
        return None
    return check


def _seed_argv(num_ranks: int, instances: int, protocol: str, params: dict) -> list[str]:
    if protocol != "Simple":
        raise ProgramError(f"alltonext_backward is written for the Simple protocol, got {protocol}")
    return [str(num_ranks // 8), str(instances)]


KNOWN_SPECS: dict[str, list[Known]] = {
    "allreduce_ring": [Known(ProgramSpec(
        "allreduce_ring", "allreduce",
        "ring reduce-scatter + ring allgather, 2(n-1) steps; channels parallel rings",
        build="allreduce_ring",
        params=(Param("channels", int, 1, "parallel rings", low=1, high=32),
                Param("manual", bool, True, "one threadblock per ring (else automatic)")),
        rank_check=lambda n, v: (f"channels ({v['channels']}) cannot exceed the rank count"
                                 if v["channels"] > n else None),
        protocols=("Simple", "LL128", "LL")))],
    "alltonext_backward": [Known(ProgramSpec(
        "alltonext_backward", "alltonext",
        "the seed: rank r's input to rank r-1, inter-node hops spread over the node's GPUs",
        build="pipeline", min_ranks=8, rank_check=_per_node("alltonext_backward"),
        protocols=("Simple",), hierarchical=False), argv=_seed_argv)],
}
