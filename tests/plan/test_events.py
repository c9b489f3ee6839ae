"""The event model decides later iterations from iteration 0 alone only where that cannot
change the outcome: every case here is run with the shortcut and without it
(``events._SHORTCUT``), and the verdict, blocked count, wait cycle, transfer count and
the data calls (in order) must agree."""

import copy
import random

import pytest

from msccl_py import ir
from msccl_py.plan import events
from msccl_py.plan.events import _repeats, simulate
from msccl_py.plan.tables import PlanError, build_plan
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


def _outcome(plan, iterations, mac, cap, reverse):
    rec = Recorder()
    res = simulate(plan, iterations, mac, cap, data=rec, reverse=reverse)
    return (res.completed, res.blocked, [str(w) for w in res.cycle], res.transfers, rec.log)


RUNS = [(it, mac, cap, rev) for it in (2, 3) for mac in (1, 2) for cap in (1, 2)
        for rev in (False, True)]


def _with_and_without(alg, monkeypatch, runs=RUNS):
    """The outcomes of ``runs`` with the shortcut, then without it."""
    plan = build_plan(alg)
    monkeypatch.setattr(events, "_SHORTCUT", True)
    short = [_outcome(plan, *r) for r in runs]
    monkeypatch.setattr(events, "_SHORTCUT", False)
    full = [_outcome(plan, *r) for r in runs]
    monkeypatch.setattr(events, "_SHORTCUT", True)
    return short, full


def _mutant(base, edit):
    alg = copy.deepcopy(base)
    edit(alg)
    alg.name += "_" + edit.__name__.strip("_")
    return alg


def _swap_first_two(alg):
    """Rank 0's ring threadblock receives before it sends: every rank waits (deadlock in
    iteration 0, so the run goes on from there)."""
    steps = alg.gpus[0].threadblocks[0].steps
    steps[0], steps[1] = steps[1], steps[0]


def _extra_send(alg):
    """Rank 0 sends one transfer more than rank 1 receives per iteration: iteration 0
    completes with an entry left in the FIFO, which fills up in later iterations."""
    tb = alg.gpus[0].threadblocks[0]
    tb.steps.append(ir.Step("send", tb.steps[0].src, tb.steps[0].dst))


def _silent_dependency(alg):
    """The dependency names a step that publishes no flag."""
    alg.gpus[0].threadblocks[1].steps[0].has_dependents = False


def _local(name, blocks):
    """One rank whose threadblocks (lists of steps) only copy locally."""
    tbs = [ir.Threadblock(i, steps=steps) for i, steps in enumerate(blocks)]
    return ir.Algorithm(name, "custom", "Simple", False, 1, 4, 1, [ir.Gpu(0, 4, 4, 0, tbs)])


def _copy(k=0, depends=(), publishes=True):
    return ir.Step("copy", ir.Loc("i", k), ir.Loc("o", k), depends=list(depends),
                   has_dependents=publishes)


def _previous_iteration():
    """tb 1 waits on (tb 0, step -1), one below tb 0's step 0: met from the start in
    iteration 0 (flags start at -1), in a later one only once tb 0 publishes in it, while
    tb 0 waits on tb 1. Iteration 0 completes alone; in iteration 1 each waits on the
    other (a deadlock the shift of iteration 0 would miss)."""
    return _local("previous_iteration", [[_copy(0, [(1, 0)])], [_copy(1, [(0, -1)])]])


def _next_iteration():
    """tb 1 waits on (tb 0, step 2), past tb 0's one step: tb 0's step 0 of the next
    iteration. Iteration 0 alone deadlocks; the full run gets further."""
    return _local("next_iteration", [[_copy(0)], [_copy(1, [(0, 2)])]])


def _late_flag():
    """tb 1 waits on tb 0's step 1, which publishes nothing, so tb 0's next iteration
    releases it, while tb 2 copies on: the order in which data sees iteration 0 differs
    between iteration 0 alone and the full run unless the shortcut stays off."""
    return _local("late_flag", [[_copy(0), _copy(1, publishes=False)],
                                [_copy(2, [(0, 1)])],
                                [_copy(3), _copy(3), _copy(3)]])


def _fed_late():
    """Rank 1 receives twice per iteration what rank 0 sends once: its second receive of
    iteration 0 takes rank 0's send of iteration 1, after or before tb 1's copies
    depending on whether iteration 1 runs (the connection is unbalanced)."""
    send = ir.Threadblock(0, send_peer=1, steps=[ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
    recv = ir.Threadblock(0, recv_peer=0, steps=[ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0)),
                                                 ir.Step("recv", ir.Loc("i", 1), ir.Loc("o", 1))])
    local = ir.Threadblock(1, steps=[_copy(2), _copy(3)])
    return ir.Algorithm("fed_late", "custom", "Simple", False, 2, 4, 1,
                        [ir.Gpu(0, 4, 4, 0, [send]), ir.Gpu(1, 4, 4, 0, [recv, local])])


CASES = [ring_allreduce(4), ring_allreduce(3, channels=2, count=2), ring_allgather(3),
         allpairs_allreduce(3), _mutant(ring_allreduce(3), _swap_first_two),
         _mutant(ring_allreduce(2), _extra_send), _mutant(ring_allgather(3), _silent_dependency),
         _previous_iteration(), _next_iteration(), _late_flag(), _fed_late()]


@pytest.mark.parametrize("alg", CASES, ids=lambda a: a.name)
def test_iteration_zero_alone_decides_as_every_iteration_does(alg, monkeypatch):
    short, full = _with_and_without(alg, monkeypatch)
    assert short == full


@pytest.mark.parametrize("alg, cap", [(_mutant(ring_allreduce(2), _extra_send), 2),
                                      (_previous_iteration(), 1)], ids=("extra_send", "previous"))
def test_cases_complete_iteration_zero_and_deadlock_later(alg, cap):
    """These cases test something: iteration 0 alone completes, the full run does not (the
    FIFO left one entry fuller per iteration; a wait on the previous iteration)."""
    plan = build_plan(alg)
    assert simulate(plan, 1, 1, cap).completed
    assert not simulate(plan, 3, 1, cap).completed


@pytest.mark.parametrize("alg", [_previous_iteration(), _late_flag(), _fed_late()],
                         ids=lambda a: a.name)
def test_each_condition_of_repeats_is_needed(alg, monkeypatch):
    """With :func:`_repeats` answering yes regardless, each of these gets another outcome
    (a missed deadlock, or data calls in another order): its check is what keeps them off
    the shortcut."""
    monkeypatch.setattr(events, "_repeats", lambda plan, mac: True)
    short, full = _with_and_without(alg, monkeypatch)
    assert short != full


def test_repeats_only_balanced_connections_and_publishing_dependencies():
    assert _repeats(build_plan(ring_allreduce(3)), 1)
    assert _repeats(build_plan(ring_allgather(3)), 1)
    assert _repeats(build_plan(allpairs_allreduce(3)), 2)
    assert not _repeats(build_plan(_mutant(ring_allreduce(2), _extra_send)), 1)
    assert not _repeats(build_plan(_mutant(ring_allgather(3), _silent_dependency)), 1)
    for alg in (_previous_iteration(), _next_iteration(), _late_flag(), _fed_late()):
        assert not _repeats(build_plan(alg), 1), alg.name


def test_every_iteration_data_runs_every_iteration(monkeypatch):
    """Data that asks for every iteration (the reference runtime) sees each one."""
    class Every(Recorder):
        every_iteration = True

    plan = build_plan(ring_allreduce(3))
    data = Every()
    res = simulate(plan, 3, 1, 2, data=data)
    assert res.completed
    assert {e[4] for e in data.log if e[0] != "done"} == {0, 1, 2}
    monkeypatch.setattr(events, "_SHORTCUT", False)
    again = Every()
    simulate(build_plan(ring_allreduce(3)), 3, 1, 2, data=again)
    assert again.log == data.log


_OPS = ["send", "recv", "copy", "reduce", "recv_copy_send", "recv_reduce_send",
        "recv_reduce_copy", "recv_reduce_copy_send"]


def _random_steps(rng: random.Random, sizes: list, t: int, odd: float) -> list:
    """Random steps of threadblock ``t`` (``sizes``: steps per threadblock): random ops,
    counts, flags and dependencies, a share ``odd`` of them naming a missing, negative or
    silent step."""
    steps = []
    for _ in range(sizes[t]):
        deps = []
        if len(sizes) > 1 and rng.random() < 0.4:
            other = rng.choice([x for x in range(len(sizes)) if x != t])
            wild = rng.random() < odd or not sizes[other]
            deps.append((other, rng.choice((-1, sizes[other], 6)) if wild
                         else rng.randrange(sizes[other])))
        steps.append(ir.Step(rng.choice(_OPS), ir.Loc("i", 0), ir.Loc("o", 0),
                             rng.choice((1, 1, 2, 3)), depends=deps,
                             has_dependents=rng.random() >= odd))
    return steps


def _random_program(rng: random.Random) -> ir.Algorithm:
    """A small random program. Half of them are rings whose threadblock ``t`` runs the same
    steps on every rank in a random order of its own, so each connection balances (they
    take the shortcut; the orders make some deadlock); the others pick random peers."""
    R = rng.choice((2, 3))
    sizes = [rng.randint(0, 5) for _ in range(rng.choice((1, 2, 2, 3)))]
    ring = rng.random() < 0.5
    odd = rng.choice((0.0, 0.2))
    shared = [_random_steps(rng, sizes, t, odd) for t in range(len(sizes))]
    for steps in shared:   # a receive for each send, a send for each receive
        steps += [ir.Step("recv" if st.is_send else "send", st.src, st.dst, st.count)
                  for st in steps if st.is_send != st.is_recv]
    gpus = []
    for r in range(R):
        tbs = []
        for t in range(len(sizes)):
            if ring:
                sp, rp = ((r + 1) % R, (r - 1) % R) if t % 2 == 0 else ((r - 1) % R, (r + 1) % R)
                steps = copy.deepcopy(shared[t])
                rng.shuffle(steps)
            else:
                peers = [p for p in range(R) if p != r] + [-1]
                sp, rp = rng.choice(peers), rng.choice(peers)
                steps = _random_steps(rng, sizes, t, odd)
            tbs.append(ir.Threadblock(t, send_peer=sp, recv_peer=rp, channel=t, steps=steps))
        gpus.append(ir.Gpu(r, 4, 4, 0, tbs))
    return ir.Algorithm("random", "custom", "Simple", False, R, 4, len(sizes), gpus)


def test_random_programs_agree_with_and_without_the_shortcut(monkeypatch):
    rng = random.Random(2026)
    used = 0
    runs = [(it, mac, cap, rev) for it in (2, 3) for mac in (1, 2) for cap in (1, 3)
            for rev in (False, True)]
    for n in range(300):
        alg = _random_program(rng)
        try:
            plan = build_plan(alg)
        except PlanError:
            continue
        if not (_repeats(plan, 1) or _repeats(plan, 2)):
            continue   # the same code runs either way
        used += 1
        short, full = _with_and_without(alg, monkeypatch, runs)
        assert short == full, f"program {n}"
    assert used >= 50   # enough of them take the shortcut to test it


def test_streamed_transfers_change_no_outcome(monkeypatch):
    """Without data, a send whose receiver already waits passes all its transfers at once
    (``events._STREAM``): verdict, blocked count, wait cycle and transfer count are those of
    the run that moves them one by one, on random programs and on a large regime ring."""
    rng = random.Random(37)
    plans = [build_plan(ring_allgather(4)), build_plan(ring_allreduce(3))]
    for _ in range(300):
        try:
            plans.append(build_plan(_random_program(rng)))
        except PlanError:
            continue
    runs = [(it, mac, cap, rev) for it in (1, 3) for mac in (1, 2) for cap in (1, 2)
            for rev in (False, True)]

    def outcomes():
        return [(res.completed, res.blocked, [str(w) for w in res.cycle], res.transfers)
                for plan in plans
                for res in (simulate(plan, it, mac, cap, reverse=rev)
                            for it, mac, cap, rev in runs)]

    monkeypatch.setattr(events, "_STREAM", True)
    streamed = outcomes()
    monkeypatch.setattr(events, "_STREAM", False)
    assert outcomes() == streamed
    assert sum(not done for done, *_ in streamed) >= 20   # deadlocks compared too
