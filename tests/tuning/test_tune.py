"""The tuner's algorithm directory: ranges tile all sizes, each XML verifies and wins its range."""

from __future__ import annotations

import math

import pytest

from msccl_py.errors import MscclError, ProgramError
from msccl_py.simulate import machine_model, simulate
from msccl_py.tuning.tune import tune
from msccl_py.verify import verify
from msccl_py.xml import read_xml


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("algos")
    result = tune("allreduce", "mi300x", out, programs=["allreduce_allpairs", "nccl_ring"],
                  sizes="1KiB:64MiB", instances=(1,), cache_dir=tmp_path_factory.mktemp("cache"))
    return out, result


def _probes(lo, hi):
    top = hi or 4 * max(lo, 1)
    points = {max(lo, 1), top, int(math.sqrt(max(lo, 1) * top))}
    return sorted(p for p in points if lo <= p and (hi == 0 or p <= hi))


def test_ranges_tile_all_sizes_without_overlap(tuned):
    out, result = tuned
    algs = [read_xml(p) for p in sorted(out.glob("*.xml"))]
    assert len(algs) == len(result.ranges) >= 2  # LL wins small sizes, Simple large ones
    assert algs[0].min_bytes == 0 and algs[-1].max_bytes == 0  # 0: unbounded
    for a, b in zip(algs, algs[1:]):
        assert a.max_bytes > 0 and b.min_bytes == a.max_bytes + 1


def test_every_xml_verifies(tuned):
    out, _ = tuned
    for path in sorted(out.glob("*.xml")):
        assert verify(read_xml(path), target="msccl-executor").status == "ok", path.name


def test_each_range_is_won_by_its_xml(tuned):
    out, result = tuned
    machine = machine_model("mi300x")
    algs = [read_xml(p) for p in sorted(out.glob("*.xml"))]
    for k, alg in enumerate(algs):
        for size in _probes(alg.min_bytes, alg.max_bytes):
            times = [simulate(other, machine, size)[0].time_us for other in algs]
            assert min(times) == pytest.approx(times[k], rel=1e-9), (k, size, times)
    # and at every sample the written winner beats every candidate tried
    for j, size in enumerate(result.sizes):
        winner = next(r for r in result.ranges if size in r.samples).winner
        assert result.times[winner][j] == min(t[j] for t in result.times)


def test_table_names_winners_and_margins(tuned):
    out, result = tuned
    text = (out / "tune.txt").read_text()
    first = result.candidates[result.ranges[0].winner].label
    assert first in text and "vs nccl" in text.splitlines()[0]
    # at 1 KiB NCCL's model runs its ring with LL: the table compares against that candidate
    assert result.candidates[result.nccl[0]].label == "nccl_ring x1 LL"
    assert text.splitlines()[1].rstrip().endswith("x")


def test_errors():
    with pytest.raises(ProgramError, match="no allreduce program named nope"):
        tune("allreduce", "mi300x", "unused", programs=["nope"])
    with pytest.raises(ProgramError, match="topology 'mi300x' has 8 ranks, not 4"):
        tune("allreduce", "mi300x", "unused", ranks=4)


def test_candidates_from_a_directory(tmp_path, tuned):
    out, _ = tuned
    result = tune("allreduce", "mi300x", tmp_path / "again", candidates_dir=out, sizes="1KiB,64MiB")
    assert {c.label.split()[0] for c in result.candidates} == {p.stem for p in out.glob("*.xml")}
    with pytest.raises(MscclError, match="no .xml files to tune from"):
        tune("allreduce", "mi300x", tmp_path / "x", candidates_dir=tmp_path / "again" / "none")
