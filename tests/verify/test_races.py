"""Race detection watches only chunks two threadblocks share, and finds the same races."""

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msccl_py.plan.tables import build_plan
from msccl_py.verify import verify
from msccl_py.verify.core import regime_settings
from msccl_py.verify.data import SymbolicState
from msccl_py.plan.events import simulate
from msccl_py.verify.postconditions import standard_initial
from msccl_py.verify.races import RaceDetector

from .test_property import programs


class _Everything:
    def __contains__(self, key):
        return True


class _WatchAll(SymbolicState):
    """The detector over every threadblock and every chunk (the definition)."""

    def _race_detector(self, plan):
        self._shared = _Everything()
        self._touches_shared = [True] * len(self._ops)
        return RaceDetector(plan)


@settings(max_examples=int(os.environ.get("MSCCL_PY_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(["small", "large"]))
def test_narrowed_detector_finds_the_same_race(alg, regime):
    plan = build_plan(alg)
    s = regime_settings(alg, plan)[regime]
    initial = standard_initial("custom", plan.call_chunks.tolist())
    results = []
    for cls in (SymbolicState, _WatchAll):
        state = cls(plan, False, initial)
        res = simulate(plan, 1, s["mac"], s["capacity"], data=state)
        results.append((res.completed, state.race()))
    assert results[0] == results[1]


def test_compiled_ring_shares_no_chunk_so_needs_no_detector():
    from allreduce_ring import allreduce_ring
    alg = allreduce_ring(8, channels=2).lower()
    plan = build_plan(alg)
    state = SymbolicState(plan, True, standard_initial("allreduce", plan.call_chunks.tolist()))
    assert state.races is None
    assert verify(alg, target="msccl").status == "ok"


def test_shared_chunk_is_watched():
    from msccl_py.verify.samples import ring_allgather
    alg = ring_allgather(2)
    plan = build_plan(alg)
    state = SymbolicState(plan, False, standard_initial("allgather", plan.call_chunks.tolist()))
    # the copy writes the output chunk the send then reads, from another threadblock
    assert state.races is not None and state._shared
