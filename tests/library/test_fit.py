"""Library programs fitted to each runtime's limits (steps, threadblocks, counts)."""

import pytest

from msccl_py import library
from msccl_py.errors import LimitError, ProgramError
from msccl_py.library import build, registry
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml
from msccl_py.targets.msccl.dialects import DIALECTS, check_limits

TARGETS = sorted(DIALECTS)


def _verified(text: str, target: str):
    alg = read_xml(text)
    check_limits(alg, target)
    verdict = verify(alg, target=target)
    # ok, or a deadlock the compiler fenced off with maxBytes
    assert verdict.status == "ok" or (verdict.status == "deadlock" and alg.max_bytes), verdict
    return alg


@pytest.mark.parametrize("target", TARGETS)
def test_ring_allreduce_past_64_steps_fits_every_target(target):
    text = library.compile_xml("allreduce_ring", 33, target=target, use_cache=False)
    alg = _verified(text, target)
    # one ring of 33 ranks is 65 steps per threadblock: the newer runtimes need two rings
    assert alg.nchannels == (1 if DIALECTS[target].max_steps_per_tb >= 65 else 2)


def test_explicit_channels_that_do_not_fit_name_the_limit_and_the_fix():
    with pytest.raises(LimitError) as info:
        library.compile_xml("allreduce_ring", 33, target="rccl", use_cache=False, channels=1)
    text = str(info.value)
    assert "has 65 steps" in text and "at most 64" in text
    assert "--param channels=2" in text and "--target msccl fits it" in text


def test_declared_target_rank_limits_refuse_early():
    spec = registry.get("allgather_allpairs")
    assert "rccl <= 64" in spec.ranks_text
    assert spec.supports(65) and not spec.supports(65, target="rccl")
    with pytest.raises(ProgramError, match="fits target rccl up to 64 ranks, got 65"):
        library.compile_xml("allgather_allpairs", 65, target="rccl", use_cache=False)


def test_select_with_a_target_picks_what_fits_it():
    choice = library.select("allreduce", 40, 1 << 30, target="rccl")
    alg = choice.compile()
    check_limits(alg, "rccl")


def test_script_entry_fits_its_target(capsys):
    from msccl_py.library import script
    entry = registry.entry("reduce_scatter_ring")
    assert script.main(entry.spec, entry.builder, ["66", "--target", "rccl"]) == 0
    alg = read_xml(capsys.readouterr().out)
    check_limits(alg, "rccl")
    assert alg.nchannels == 2


def _runs(spec, target):
    return spec.operation in ("alltonext", "barrier") and target == "msccl" or \
        spec.operation not in ("alltonext", "barrier") and \
        (spec.operation not in ("gather", "scatter") or target != "msccl")


def _check_at_scale(name: str, n: int):
    spec = registry.get(name)
    for target in TARGETS:
        if not _runs(spec, target) or not spec.supports(n, target=target):
            continue
        _verified(library.compile_xml(name, n, target=target, use_cache=False), target)


@pytest.mark.parametrize("name", ["reduce_scatter_ring", "broadcast_scatter_allgather"])
def test_library_at_scale_fast_subset(name):
    _check_at_scale(name, 33)


@pytest.mark.slow
@pytest.mark.parametrize("n", [33, 64, 128])
@pytest.mark.parametrize("name", registry.names())
def test_every_library_program_fits_every_target_at_scale(name, n):
    """What ``list`` claims at 33, 64 and 128 ranks compiles and verifies on every
    target that runs the collective; a declared per-target bound holds at the bound."""
    _check_at_scale(name, n)
    spec = registry.get(name)
    for target, most in spec.target_max_ranks:
        if n == 33 and spec.supports(most, target=target):
            _verified(library.compile_xml(name, most, target=target, use_cache=False), target)
