"""Random programs: the emulated kernel and the reference runtime agree on data and deadlocks."""

from __future__ import annotations

import os

import numpy as np
from gpu_runtime_algos import needs_gxx, same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.runtime import reference
from msccl_py.runtime.cupy import emulated_run
from msccl_py.plan.tables import build_plan
from msccl_py.verify.data import SymbolicState
from msccl_py.plan.events import simulate
from msccl_py.verify.postconditions import standard_initial

pytestmark = needs_gxx
BUFFSIZE = 1024       # tiny FIFOs: many iterations and real back-pressure at small sizes


@st.composite
def programs(draw):
    """Transfers between ranks on per-peer threadblocks, local copies/reduces, random deps."""
    R, n = draw(st.integers(2, 4)), draw(st.integers(1, 5))
    protocol = draw(st.sampled_from(["Simple", "LL", "LL128"]))
    tbs = {r: {} for r in range(R)}
    order = []

    def tb(rank, key, peer=-1):
        t = tbs[rank].get(key)
        if t is None:
            t = tbs[rank][key] = ir.Threadblock(len(tbs[rank]), peer, peer)
        return t

    def loc(bufs):
        return ir.Loc(draw(st.sampled_from(bufs)), draw(st.integers(0, n - 1)))

    for _ in range(draw(st.integers(1, 7))):
        a = draw(st.integers(0, R - 1))
        src, dst = loc(["i", "s"]), loc(["o", "s"])
        c = draw(st.integers(1, n - max(src.offset, dst.offset)))
        if draw(st.integers(0, 3)) == 0:
            step = ir.Step(draw(st.sampled_from(["copy", "reduce"])), src, dst, c)
            tb(a, "local").steps.append(step)
            order.append((a, "local", step))
            continue
        b = draw(st.sampled_from([r for r in range(R) if r != a]))
        send = ir.Step("send", src, dst, c)
        tb(a, ("peer", b), b).steps.append(send)
        op = draw(st.sampled_from(["recv", "recv_reduce_copy"]))
        recv = ir.Step(op, dst if op == "recv_reduce_copy" else src, dst, c)
        tb(b, ("peer", a), a).steps.append(recv)
        order += [(a, ("peer", b), send), (b, ("peer", a), recv)]
    for r in range(R):   # interleave each peer threadblock's sends and receives
        for key, t in tbs[r].items():
            if key != "local":
                sends = [x for x in t.steps if x.is_send]
                recvs = [x for x in t.steps if not x.is_send]
                merged = []
                while sends or recvs:
                    pick = sends if (sends and (not recvs or draw(st.booleans()))) else recvs
                    merged.append(pick.pop(0))
                t.steps = merged
    for pos, (r, key, step) in enumerate(order):
        earlier = [x for x in order[:pos] if x[0] == r and x[1] != key]
        if earlier and draw(st.booleans()):
            _, tkey, tstep = draw(st.sampled_from(earlier))
            target = tbs[r][tkey]
            tstep.has_dependents = True
            step.depends.append((target.id, target.steps.index(tstep)))
    gpus = [ir.Gpu(r, n, n, n, sorted(tbs[r].values(), key=lambda t: t.id)) for r in range(R)]
    return ir.Algorithm("random", "custom", protocol, False, R, n, 1, gpus, outofplace=True)


def outcome(fn):
    try:
        return fn()
    except MscclDeadlockError:
        return "deadlock"
    except MscclRuntimeError as exc:
        return ("rejected", str(exc))


def racy(alg) -> bool:
    """Unordered accesses to one chunk: runtimes may legitimately differ in the data."""
    plan = build_plan(alg)
    state = SymbolicState(plan, False, standard_initial("custom", plan.call_chunks.tolist()))
    simulate(plan, 1, 71, 8, data=state)
    return state.race() is not None


@settings(max_examples=int(os.environ.get("MSCCL_PY_EXAMPLES", "30")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from([3, 40, 200]))
def test_emulation_agrees_with_reference(alg, S):
    rng = np.random.default_rng(S)
    xs = [rng.integers(-4, 5, alg.nchunksperloop * S).astype(np.float64)
          for _ in range(alg.ngpus)]
    ref = outcome(lambda: reference.run(alg, xs, buffsize=BUFFSIZE))
    emu = outcome(lambda: emulated_run(alg, xs, buffsize=BUFFSIZE, watchdog=0.4))
    if isinstance(ref, tuple) or isinstance(emu, tuple):
        assert ref == emu
        return
    if ref == "deadlock" or emu == "deadlock":
        assert ref == emu
        return
    if not racy(alg):
        assert same(emu, ref)
