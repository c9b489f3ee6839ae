"""The event model decides later iterations from iteration 0 alone only where that cannot
change the outcome: the same verdict, wait cycle, transfer count and data events as the
run of every iteration."""

import copy

import pytest

from msccl_py import ir
from msccl_py.plan import events
from msccl_py.plan.events import _repeats, simulate
from msccl_py.plan.tables import build_plan
from msccl_py.verify.samples import allpairs_allreduce, ring_allgather, ring_allreduce


class Recorder:
    """Every transfer and step completion the model reports, in order."""

    def __init__(self):
        self.log = []

    def transfer(self, g, lo, hi, payload, iteration):
        self.log.append((g, lo, hi, payload, iteration))
        return (g, lo, hi)

    def complete(self, g):
        self.log.append(("done", g))


def _swap_first_two(alg):
    """Rank 0's ring threadblock receives before it sends: every rank waits (deadlock)."""
    steps = alg.gpus[0].threadblocks[0].steps
    steps[0], steps[1] = steps[1], steps[0]


def _extra_send(alg):
    """Rank 0 sends one transfer more than rank 1 receives per iteration (unbalanced)."""
    tb = alg.gpus[0].threadblocks[0]
    tb.steps.append(ir.Step("send", tb.steps[0].src, tb.steps[0].dst))


def _silent_dependency(alg):
    """The dependency names a step that publishes no flag."""
    alg.gpus[0].threadblocks[1].steps[0].has_dependents = False


def _mutant(base, edit):
    alg = copy.deepcopy(base)
    edit(alg)
    return alg


CASES = [ring_allreduce(4), ring_allreduce(3, channels=2, count=2), ring_allgather(3),
         allpairs_allreduce(3), _mutant(ring_allreduce(3), _swap_first_two),
         _mutant(ring_allreduce(2), _extra_send), _mutant(ring_allgather(3), _silent_dependency)]


def _outcome(plan, iterations, mac, cap, reverse):
    rec = Recorder()
    res = simulate(plan, iterations, mac, cap, data=rec, reverse=reverse)
    return (res.completed, res.blocked, [str(w) for w in res.cycle], res.transfers, rec.log)


@pytest.mark.parametrize("alg", CASES, ids=lambda a: a.name)
def test_iteration_zero_alone_decides_as_every_iteration_does(alg, monkeypatch):
    plan = build_plan(alg)
    runs = [(it, mac, cap, rev) for it in (2, 3) for mac in (1, 2) for cap in (1, 2)
            for rev in (False, True)]
    short = [_outcome(plan, *r) for r in runs]
    monkeypatch.setattr(events, "_repeats", lambda plan, mac: False)
    assert short == [_outcome(build_plan(alg), *r) for r in runs]


def test_repeats_only_balanced_connections_and_publishing_dependencies():
    assert _repeats(build_plan(ring_allreduce(3)), 1)
    assert _repeats(build_plan(ring_allgather(3)), 1)
    assert not _repeats(build_plan(_mutant(ring_allreduce(2), _extra_send)), 1)
    assert not _repeats(build_plan(_mutant(ring_allgather(3), _silent_dependency)), 1)
