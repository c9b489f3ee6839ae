"""Random IR programs: the verifier's model, the reference runtime and the independent
simulator agree on deadlocks and on every chunk's data."""

import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from msccl_py import ir
from msccl_py.runtime import reference
from msccl_py.plan.tables import build_plan
from msccl_py.verify import verify
from msccl_py.verify.core import regime_settings
from msccl_py.verify.data import STRIDE, SymbolicState
from msccl_py.plan.events import simulate
from msccl_py.verify.postconditions import standard_initial

from . import independent

BUFFSIZE = 1024


@st.composite
def programs(draw):
    R = draw(st.integers(2, 4))
    n = draw(st.integers(1, 6))
    protocol = draw(st.sampled_from(["Simple", "LL"]))
    tbs = {r: {} for r in range(R)}      # rank -> key -> Threadblock
    order = []                           # (rank, key, step) in generation order

    def tb(rank, key, send=-1, recv=-1):
        t = tbs[rank].get(key)
        if t is None:
            t = tbs[rank][key] = ir.Threadblock(len(tbs[rank]), send, recv)
        return t

    def loc(bufs):   # offset 0 half the time, so multi-chunk steps are common
        off = draw(st.integers(0, n - 1)) if draw(st.booleans()) else 0
        return ir.Loc(draw(st.sampled_from(bufs)), off)

    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["xfer", "xfer", "xfer", "local"]))
        a = draw(st.integers(0, R - 1))
        if kind == "local":
            src, dst = loc(["i", "s"]), loc(["o", "s"])
            c = draw(st.integers(1, n - max(src.offset, dst.offset)))
            step = ir.Step(draw(st.sampled_from(["copy", "reduce"])), src, dst, c)
            tb(a, "local").steps.append(step)
            order.append((a, "local", step))
            continue
        b = draw(st.sampled_from([r for r in range(R) if r != a]))
        src, dst = loc(["i", "s"]), loc(["o", "s"])
        c = draw(st.integers(1, n - max(src.offset, dst.offset)))
        # one threadblock per peer, both directions, as MSCCLang's allpairs programs have
        snd = tb(a, ("peer", b), send=b, recv=b)
        rcv = tb(b, ("peer", a), send=a, recv=a)
        send = ir.Step("send", src, dst, c)
        snd.steps.append(send)
        order.append((a, ("peer", b), send))
        op = draw(st.sampled_from(["recv", "recv_reduce_copy"]))
        recv = ir.Step(op, dst if op == "recv_reduce_copy" else src, dst, c)
        rcv.steps.append(recv)
        order.append((b, ("peer", a), recv))
    # interleave each pair threadblock's sends and receives at random; each keeps its own
    # order, so the connections still pair up (send-first pairs deadlock with big messages)
    for r in range(R):
        for key, t in tbs[r].items():
            if key == "local":
                continue
            sends = [x for x in t.steps if x.is_send]
            recvs = [x for x in t.steps if not x.is_send]
            merged = []
            while sends or recvs:
                pick = sends if (sends and (not recvs or draw(st.booleans()))) else recvs
                merged.append(pick.pop(0))
            t.steps = merged
    # dependencies between threadblocks of one rank, mostly on earlier-generated steps
    for pos, (r, key, step) in enumerate(order):
        if not draw(st.booleans()):
            continue
        earlier = [x for x in order[:pos] if x[0] == r and x[1] != key]
        later = [x for x in order[pos + 1:] if x[0] == r and x[1] != key]
        pool = earlier if (earlier and draw(st.integers(0, 7)) > 0) else later
        if not pool:
            continue
        _, tkey, tstep = draw(st.sampled_from(pool))
        target = tbs[r][tkey]
        tstep.has_dependents = True
        step.depends.append((target.id, next(j for j, x in enumerate(target.steps)
                                             if x is tstep)))
    gpus = [ir.Gpu(r, n, n, n, sorted(tbs[r].values(), key=lambda t: t.id)) for r in range(R)]
    return ir.Algorithm("random", "custom", protocol, False, R, n, 1, gpus, outofplace=True)


def evaluate(value, inputs, S):
    total = np.zeros(S, dtype=np.int64)
    for code in value:
        r, k = divmod(code, STRIDE)
        total += inputs[r][k * S:(k + 1) * S]
    return total


@settings(max_examples=int(os.environ.get("MSCCL_PY_EXAMPLES", "120")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(["small", "large"]))
def test_models_agree(alg, regime):
    first = verify(alg, target="msccl")
    # two adjacent reduces into one chunk with different counts are (rightly) refused
    assume(not (first.status == "invalid" and "fuse into one" in first.reason))
    assert first.status in ("ok", "deadlock"), first.report()
    per_iter = max(1, independent.iteration_bytes(alg.protocol, BUFFSIZE) // 8)
    maxc = max(s.count for _, t in alg.threadblocks() for s in t.steps)
    S = 2 * per_iter if regime == "large" else max(1, per_iter // maxc)
    nbytes = alg.nchunksperloop * S * 8
    v = verify(alg, target="msccl", nbytes=nbytes, itemsize=8, buffsize=BUFFSIZE)
    out, xs = independent.run(alg, S, BUFFSIZE)
    assert (v.status == "deadlock") == out.deadlock, v.report()
    if out.deadlock:
        return
    outs = reference.run(alg, xs, buffsize=BUFFSIZE)
    plan = build_plan(alg)
    (s,) = regime_settings(alg, plan, BUFFSIZE, nbytes, 8).values()
    state = SymbolicState(plan, False, standard_initial("custom", plan.call_chunks.tolist()))
    assert simulate(plan, 1, s["mac"], s["capacity"], data=state).completed
    if state.race() is not None:
        return      # unordered accesses: each iteration's slice may see another order
    for r in range(alg.ngpus):
        for k in range(alg.nchunksperloop):
            value = state.value(r, "o", k)
            got = outs[r][k * S:(k + 1) * S]
            if value is None:
                continue
            np.testing.assert_array_equal(got, evaluate(value, xs, S))
            np.testing.assert_array_equal(out.outputs[r][k * S:(k + 1) * S], got)
