"""Runtime limits: the data, and the check the writer and the verifier share."""

from __future__ import annotations

import dataclasses

import pytest

from msccl_py import ir
from msccl_py.errors import LimitError, XmlError
from msccl_py.targets.msccl import write_xml
from msccl_py.plan.geometry import MAX_COUNT
from msccl_py.plan.reductions import fused_reductions
from msccl_py.targets.msccl.dialects import DIALECTS, check_limits, get_dialect, xml_step_count

L = ir.Loc


def one_gpu(tbs: list[ir.Threadblock], collective: str = "allreduce",
            nchannels: int = 1) -> ir.Algorithm:
    return ir.Algorithm("lim", collective, "Simple", True, 1, 1, nchannels,
                        [ir.Gpu(0, 1, 0, 64, tbs)])


def copies(n: int) -> list[ir.Step]:
    return [ir.Step("copy", L("i", 0), L("s", 0)) for _ in range(n)]


def reduce(src: int, dst: int = 0, **kw) -> ir.Step:
    return ir.Step("reduce", L("s", src), L("i", dst), **kw)


def test_limit_table():
    assert {n: (d.max_steps_per_tb, d.max_tbs_per_gpu, d.max_channels)
            for n, d in DIALECTS.items()} == {"msccl": (256, 216, 32),
                                              "msccl-executor": (64, 1024, 32),
                                              "rccl": (64, 64, 128)}
    assert all(d.max_count == MAX_COUNT == 72 and d.max_reduce_sources == 16
               for d in DIALECTS.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        DIALECTS["msccl"].max_channels = 64
    assert get_dialect(DIALECTS["rccl"]) is DIALECTS["rccl"]
    with pytest.raises(XmlError, match="unknown XML target 'nccl'; choose one of msccl, "
                                       "msccl-executor, rccl"):
        get_dialect("nccl")


@pytest.mark.parametrize("target", list(DIALECTS))
def test_steps_per_threadblock_count_nops(target):
    limit = DIALECTS[target].max_steps_per_tb
    at_limit = copies(limit - 3) + [ir.Step("copy", depends=[(1, 0), (1, 0), (1, 0)])]
    tbs = [ir.Threadblock(0, steps=at_limit), ir.Threadblock(1, steps=copies(1))]
    assert xml_step_count(tbs[0]) == limit
    check_limits(one_gpu(tbs), target)
    tbs[0].steps.insert(0, ir.Step("copy"))
    with pytest.raises(LimitError, match=f"gpu 0 threadblock 0 has {limit + 1} steps \\(nops "
                                         f"included\\); target {target} allows at most {limit}$"):
        check_limits(one_gpu(tbs), target)


@pytest.mark.parametrize("target", list(DIALECTS))
def test_threadblocks_per_gpu(target):
    limit = DIALECTS[target].max_tbs_per_gpu
    tbs = [ir.Threadblock(t) for t in range(limit)]
    check_limits(one_gpu(tbs), target)
    tbs.append(ir.Threadblock(limit))
    with pytest.raises(LimitError, match=f"gpu 0 has {limit + 1} threadblocks; target {target} "
                                         f"allows at most {limit}"):
        write_xml(one_gpu(tbs), target)


@pytest.mark.parametrize("target", list(DIALECTS))
def test_channels(target):
    limit = DIALECTS[target].max_channels
    check_limits(one_gpu([ir.Threadblock(0, channel=limit - 1)], nchannels=limit), target)
    with pytest.raises(LimitError, match=f"algorithm uses {limit + 1} channels; target {target}"):
        check_limits(one_gpu([], nchannels=limit + 1), target)
    with pytest.raises(LimitError, match=f"gpu 0 threadblock 0 uses channel {limit}"):
        check_limits(one_gpu([ir.Threadblock(0, channel=limit)]), target)


@pytest.mark.parametrize("count,ok", [(0, True), (71, True), (72, False), (-1, False)])
def test_count_range(count, ok):
    alg = one_gpu([ir.Threadblock(0, steps=[ir.Step("copy", count=count)])])
    if ok:
        check_limits(alg, "rccl")
    else:
        with pytest.raises(LimitError, match=f"gpu 0 threadblock 0 step 0 has count {count}; "
                                             f"target rccl needs 0 <= count < 72"):
            check_limits(alg, "rccl")


def test_collectives_per_target():
    check_limits(one_gpu([], "custom"), "msccl")
    with pytest.raises(LimitError, match="target msccl-executor does not run collective 'custom'"):
        check_limits(one_gpu([], "custom"), "msccl-executor")
    with pytest.raises(LimitError, match="target msccl does not run collective 'gather'"):
        check_limits(one_gpu([], "gather"), "msccl")
    check_limits(one_gpu([], "gather"), "rccl")


def test_reduction_fusion_follows_the_runtime_parser():
    tb = ir.Threadblock(0, steps=[reduce(k) for k in range(20)])
    assert fused_reductions(tb) == [(0, 16), (16, 4)]          # the 16th reduction cuts
    tb = ir.Threadblock(0, steps=[reduce(0), reduce(1, has_dependents=True), reduce(2),
                                  reduce(3, dst=1), reduce(4, dst=1, depends=[(1, 0)]),
                                  ir.Step("copy"), reduce(5, dst=1), reduce(6, dst=1)])
    # hasdep ends a chain; a new dst starts one; a dependency or another op breaks it
    assert fused_reductions(tb) == [(0, 2), (2, 1), (3, 1), (4, 1), (6, 2)]
    other_src = ir.Step("reduce", L("o", 0), L("i", 0))
    assert fused_reductions(ir.Threadblock(0, steps=[reduce(0), other_src])) == [(0, 1), (1, 1)]


def test_fused_reduction_over_16_sources_is_refused():
    # ten reductions, a break, then 20: the running count reaches 16 inside the second chain
    # (cut at 6); the rest, 14, stays under the limit
    first = [reduce(k, has_dependents=k == 9) for k in range(10)]
    ok = ir.Threadblock(0, steps=first + [reduce(k, dst=1) for k in range(20)])
    assert fused_reductions(ok) == [(0, 10), (10, 6), (16, 14)]
    check_limits(one_gpu([ok]), "msccl")
    # 17 first (cut at 16, then 1), then a chain of 17 that the per-threadblock count never cuts
    bad = ir.Threadblock(0, steps=[reduce(k) for k in range(17)] + [ir.Step("copy")]
                         + [reduce(k, dst=1) for k in range(17)])
    assert fused_reductions(bad) == [(0, 16), (16, 1), (18, 17)]
    with pytest.raises(LimitError, match="gpu 0 threadblock 0 steps 18..34 fuse into one "
                                         "reduction of 17 sources; target msccl allows at most 16"):
        write_xml(one_gpu([bad]), "msccl")
