"""Allreduce composed as a reduce-scatter followed by an allgather, each phase selectable.

The buffer is split into ``num_ranks`` chunks; the reduce-scatter leaves rank
r with chunk r reduced and the allgather spreads the chunks. Phases:
``ring`` (n-1 steps, any rank count, bandwidth-optimal), ``allpairs`` (one
step, n-1 connections per rank) and ``halving`` / ``doubling`` (log2 n steps,
power-of-two rank counts only). Mixing them trades latency for connection
count, e.g. an all-pairs reduce-scatter with a ring allgather.
"""

from msccl_py.library.prelude import *

#: each phase as (ranks, buffer, rings) -> DSL calls over blocks ``0..n-1``
REDUCE_SCATTERS = {
    "ring": lambda ranks, work, rings: patterns.ring_reduce_scatter(ranks, work, lambda j: j,
                                                                     rings=rings),
    "allpairs": lambda ranks, work, rings: patterns.allpairs_reduce_scatter(ranks, work,
                                                                             lambda j: j),
    "halving": lambda ranks, work, rings: patterns.halving_reduce_scatter(len(ranks), work),
}
ALLGATHERS = {
    "ring": lambda ranks, work, rings: patterns.ring_allgather(ranks, work, lambda j: j,
                                                               rings=rings),
    "allpairs": lambda ranks, work, rings: patterns.allpairs_allgather(ranks, work, lambda j: j),
    "doubling": lambda ranks, work, rings: patterns.doubling_allgather(len(ranks), work),
}
RS_KINDS = tuple(REDUCE_SCATTERS)
AG_KINDS = tuple(ALLGATHERS)


def _pow2_phases(num_ranks, values):
    if patterns.rings_check(num_ranks, values):
        return patterns.rings_check(num_ranks, values)
    if num_ranks & (num_ranks - 1) and (values.get("rs") == "halving"
                                        or values.get("ag") == "doubling"):
        return f"halving/doubling phases need a power-of-two rank count, got {num_ranks}"
    return None


@library_program(
    "allreduce", "reduce-scatter + allgather composition with selectable phase algorithms",
    min_ranks=1, params=(Param("rs", str, "ring", "reduce-scatter phase", choices=RS_KINDS),
                         Param("ag", str, "ring", "allgather phase", choices=AG_KINDS),
                         patterns.INPLACE["allreduce"], patterns.RINGS),
    rank_check=_pow2_phases, spread="channels", protocols=("Simple", "LL128", "LL"))
def allreduce_rs_ag(n, rs="ring", ag="ring", inplace=True, channels=1):
    """Build the composed allreduce (returns the finished MSCCLProgram).

    Parameters: ``rs`` (ring | allpairs | halving, default ring), ``ag`` (ring |
    allpairs | doubling, default ring), ``inplace`` (default true), ``channels``
    (rings of the ring phases; default: the fewest that fit the target).

        python programs/allreduce_rs_ag.py 8 --rs allpairs --ag ring --protocol LL128
    """
    require_ranks("reduce-scatter + allgather allreduce", n, minimum=1)
    if rs not in RS_KINDS:
        raise ProgramError(f"allreduce_rs_ag: rs must be one of {', '.join(RS_KINDS)}, got {rs!r}")
    if ag not in AG_KINDS:
        raise ProgramError(f"allreduce_rs_ag: ag must be one of {', '.join(AG_KINDS)}, got {ag!r}")
    if rs == "halving":
        require_power_of_two("a recursive-halving reduce-scatter", n)
    if ag == "doubling":
        require_power_of_two("a recursive-doubling allgather", n)
    with program(AllReduce(n, n, inplace), name=f"allreduce_{rs}_{ag}"):
        work = patterns.output_buffer(n, n, inplace)
        ranks = list(range(n))
        REDUCE_SCATTERS[rs](ranks, work, channels)
        ALLGATHERS[ag](ranks, work, channels)


if __name__ == "__main__":
    sys.exit(allreduce_rs_ag.main())
