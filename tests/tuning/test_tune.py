"""The tuner's output: ranges tile under each runtime's rule, every XML verifies and is within 2%
of the best inside its range, no slivers, call kinds, chunk-count fallback, a loadable folder."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from msccl_py import library
from msccl_py.errors import MscclError, ProgramError
from msccl_py.simulate import machine_model, simulate
from msccl_py.tuning import selection
from msccl_py.tuning.ranges import TOLERANCE
from msccl_py.tuning.tune import REPORT, _takes, tune
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml, write_xml

MACHINE = "mi300x"
SIZES = "1KiB:64MiB"


@pytest.fixture(scope="module", params=["msccl-executor", "msccl"])
def tuned(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    result = tune("allreduce", MACHINE, out, programs=["allreduce_allpairs", "nccl_ring"],
                  sizes=SIZES, instances=(1,), target=request.param)
    return out, result


@pytest.fixture(scope="module", params=["msccl-executor", "msccl"])
def both_kinds(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("ag-" + request.param)
    result = tune("allgather", MACHINE, out, programs=["allgather_ring"], sizes="1KiB,1MiB,64MiB",
                  instances=(1,), channels=(1, 8), target=request.param)
    return out, result


def _serves_kind(meta, inplace: bool, target: str) -> bool:
    return selection.serves(replace(meta, min_bytes=0, max_bytes=0 if target != "msccl" else
                                    selection.UNBOUNDED, nchunks=1), 64, 1, inplace, target)


def _tilings(out, target):
    """Per call kind, the files serving it in size order, as (meta, path)."""
    metas = [(selection.read_meta(p), p) for p in sorted(out.glob("*.xml"))]
    return {inplace: sorted((m for m in metas if _serves_kind(m[0], inplace, target)),
                            key=lambda m: m[0].min_bytes)
            for inplace in (True, False)}


def _check_tiling(files, target):
    windows = [selection.window(m, target) for m, _ in files]
    assert windows[0][0] == 0 and windows[-1][1] is None
    for (m, _), (n, _) in zip(files, files[1:]):
        # boundary sizes exactly: the last of one file is one below the first of the next
        if target == "msccl":
            assert n.min_bytes == m.max_bytes  # minBytes <= n < maxBytes
        else:
            assert n.min_bytes == m.max_bytes + 1  # minBytes <= n <= maxBytes
        b = selection.window(m, target)[1]
        one = [replace(x, nchunks=1) for x in (m, n)]
        assert [selection.serves(x, b, 1, x.inplace, target) for x in one] == [True, False]
        assert [selection.serves(x, b + 1, 1, x.inplace, target) for x in one] == [False, True]


def test_ranges_tile_all_sizes_under_the_targets_rule(tuned):
    out, result = tuned
    tilings = _tilings(out, result.target)
    _check_tiling(tilings[True], result.target)
    assert not tilings[False]  # the library's allreduces run in place only
    assert len(tilings[True]) == len(result.files) >= 2


def test_the_folder_holds_only_what_the_runtime_loads(tuned):
    out, result = tuned
    assert {p.name for p in out.iterdir() if not p.is_file()} == {REPORT}
    assert all(p.suffix == ".xml" for p in out.iterdir() if p.is_file())
    text = (out / REPORT / "tune.txt").read_text()
    assert "vs nccl" in text and "out-of-place calls: no candidate serves them" in text
    load = "MSCCL_XML_FILES=" if result.target == "msccl" else f"MSCCL_ALGO_DIR={out}"
    assert load in text


def test_every_xml_verifies(tuned):
    out, result = tuned
    for path in sorted(out.glob("*.xml")):
        assert verify(read_xml(path), target=result.target).status == "ok", path.name


def _probes(lo, hi, last):
    """Both ends, one in from each, and sizes spread across (past the last sample when open)."""
    a, b = max(lo, 1), hi if hi is not None else 4 * last
    spread = {int(a * (b / a) ** (k / 12)) for k in range(13)}
    return sorted(p for p in {a, b, a + 1, b - 1, *spread} if a <= p <= b)


def test_each_range_is_within_2_percent_of_the_best_inside_it(tuned):
    out, result = tuned
    machine = machine_model(MACHINE)
    # the best the runtime could run there: a candidate whose chunk count cannot take a size
    # would run NCCL instead, so it is no rival (nccl_ring's LL beats allpairs near 1 MiB here)
    takes = _takes(result.candidates, 4, result.target)
    for f in result.files:
        alg = read_xml(f.path)
        for size in _probes(f.lo, f.hi, result.sizes[-1]):
            best = min(simulate(c.alg, machine, size)[0].time_us
                       for i, c in enumerate(result.candidates)
                       if c.admits(size) and takes(i, size))
            mine = simulate(alg, machine, size)[0].time_us
            assert mine <= TOLERANCE * best * (1 + 1e-9), (f.path.name, size, mine / best)


def test_no_sliver_ranges(tuned):
    _, result = tuned
    machine = machine_model(MACHINE)
    ranges = result.tilings["in-place"]
    for a, b in zip(ranges, ranges[1:]):
        sizes = _probes(a.lo, a.hi, result.sizes[-1]) + _probes(b.lo, b.hi, result.sizes[-1])
        times = [[simulate(c.alg, machine, s)[0].time_us for s in sizes]
                 for c in result.candidates]
        best = [min(col) for col in zip(*times)]
        # no one candidate could serve both within 2%: they were right to stay apart
        assert all(any(t > TOLERANCE * m for t, m in zip(row, best)) for row in times)


def test_sizes_the_chunk_count_cannot_take_fall_back_to_nccl(tuned):
    out, result = tuned
    target, size = result.target, 4
    files = [selection.read_meta(f.path) for f in result.files]
    order = selection.load_order([f.path for f in result.files], target)
    metas = [files[[str(f.path) for f in result.files].index(p)] for p in order]
    loaded = set(order[:selection.rule(target).max_algos])   # microsoft/msccl loads 4 files
    for k, f in enumerate(result.files):
        if str(f.path) not in loaded:
            continue
        meta = selection.read_meta(f.path)
        assert f.granule == selection.granule(meta, size, target)
        lo, hi = f.lo, f.hi if f.hi is not None else f.lo + 8 * f.granule
        runs = (lo // f.granule + 1) * f.granule
        if runs <= hi:
            assert metas[selection.select(metas, "allreduce", 8, runs, size, True, target)] == meta
        odd = runs - size  # a float32 call the chunk count does not divide
        if f.granule > size and lo <= odd <= hi:
            assert selection.select(metas, "allreduce", 8, odd, size, True, target) is None
    assert any(f.granule > size for f in result.files)  # nccl_ring: 7 rings x 8 ranks
    text = (out / REPORT / "tune.txt").read_text()
    for f in result.files:
        if f.granule & (f.granule - 1):  # 224 B: no power of two is a multiple
            assert f.powers[0] == 0
            assert not f.powers[1] or f"{f.path.name}" in text and "none of the" in text


def test_in_place_and_out_of_place_files(both_kinds):
    out, result = both_kinds
    target = result.target
    tilings = _tilings(out, target)
    for inplace in (True, False):
        _check_tiling(tilings[inplace], target)
    metas = [selection.read_meta(p) for p in out.glob("*.xml")]
    if target == "msccl":  # one kind per file: two files per range
        assert 2 * sum(m.inplace for m in metas) == len(metas)
        assert all(m.outofplace != m.inplace for m in metas)
    else:  # allgather_ring verifies in both: one file serves both
        assert all(m.inplace and m.outofplace for m in metas)
    assert set(result.tilings) == {"in-place", "out-of-place"}
    assert "in-place and out-of-place calls:" in (out / REPORT / "tune.txt").read_text()
    for path in out.glob("*.xml"):
        assert verify(read_xml(path), target=target).status == "ok", path.name


def test_rerun_replaces_its_own_files_and_refuses_foreign_ones(tmp_path):
    kw = dict(programs=["allreduce_allpairs"], sizes="1KiB,1MiB", instances=(1,))
    first = tune("allreduce", MACHINE, tmp_path, **kw)
    again = tune("allreduce", MACHINE, tmp_path, target="msccl", **kw)
    assert sorted(p.name for p in tmp_path.glob("*.xml")) == sorted(f.path.name
                                                                    for f in again.files)
    assert first.files and all(f.path.exists() for f in again.files)
    (tmp_path / "mine.xml").write_text("<algo/>")
    with pytest.raises(MscclError, match="holds mine.xml, not written by tune"):
        tune("allreduce", MACHINE, tmp_path, **kw)


def test_msccl_loads_four_files_and_the_note_says_which_are_left(tmp_path):
    result = tune("allgather", MACHINE, tmp_path, programs=["allgather_ring", "nccl_ring_allgather"],
                  sizes="1KiB:64MiB", instances=(1,), channels=(8,), target="msccl")
    assert len(result.files) > 4  # a file per call kind and range
    note = next(n for n in result.notes if "loads at most 4 algorithms" in n)
    assert all(f.path.name in note for f in result.load_order[4:])
    text = (tmp_path / REPORT / "tune.txt").read_text()
    assert "MSCCL_XML_FILES=" + ":".join(str(f.path) for f in result.load_order) in text
    assert sorted(f.path for f in result.load_order) == sorted(f.path for f in result.files)


def test_errors():
    with pytest.raises(ProgramError, match="no allreduce program named nope"):
        tune("allreduce", MACHINE, "unused", programs=["nope"])
    with pytest.raises(ProgramError, match="topology 'mi300x' has 8 ranks, not 4"):
        tune("allreduce", MACHINE, "unused", ranks=4)


def test_sizes_no_candidate_is_verified_for_are_refused(tmp_path):
    alg = library.compile("allreduce_allpairs", 8)
    (tmp_path / "small.xml").write_text(write_xml(replace(alg, max_bytes=4096)))
    with pytest.raises(MscclError, match="covers every sample size: in-place calls: NCCL runs "
                                         "them [(]no candidate is verified for 65536 bytes"):
        tune("allreduce", MACHINE, tmp_path / "out", candidates_dir=tmp_path, sizes="1KiB,64KiB",
             only_candidates=True)


def test_candidates_from_a_directory(tmp_path, tuned):
    out, result = tuned
    again = tune("allreduce", MACHINE, tmp_path / "again", candidates_dir=out,
                 sizes="1KiB,64MiB", target=result.target, only_candidates=True)
    assert {c.label.split()[0] for c in again.candidates} == {p.stem for p in out.glob("*.xml")}
    assert not math.isinf(min(t[0] for t in again.times))
    with pytest.raises(MscclError, match="no .xml files to tune from"):
        tune("allreduce", MACHINE, tmp_path / "x", candidates_dir=tmp_path / "again" / "none")


@pytest.mark.slow
def test_synthesized_candidates_join_and_win_where_they_are_fastest(tmp_path):
    pytest.importorskip("highspy")
    # on MI250 NCCL's rings reach 68% of the allgather bound; the synthesized trees ~92%
    result = tune("allgather", "mi250", tmp_path, programs=["nccl_ring_allgather"],
                  sizes="1KiB,1GiB", instances=(1,), synthesize=True)
    labels = [c.label for c in result.candidates]
    assert any(lb.startswith("synth_bandwidth trees") for lb in labels), labels
    assert any(lb.startswith("synth_latency") for lb in labels), labels
    big = result.tilings["out-of-place"][-1]
    assert result.candidates[big.winner].label.startswith("synth_bandwidth"), big
    last = result.sizes.index(1 << 30)
    ring = min(t[last] for c, t in zip(result.candidates, result.times)
               if c.label.startswith("nccl_ring"))
    assert result.times[big.winner][last] * 1.3 <= ring
    for f in result.files:   # library, NCCL-baseline and synthesized files side by side
        assert verify(read_xml(f.path), target="msccl-executor").status == "ok", f.path.name


def test_synthesized_candidates_are_skipped_without_highs(tmp_path, monkeypatch):
    from msccl_py.synthesis import lp
    monkeypatch.setattr(lp, "available", lambda: False)
    result = tune("allgather", MACHINE, tmp_path, programs=["allgather_ring"], sizes="1KiB",
                  instances=(1,), channels=(8,), synthesize=True)
    assert not any(c.label.startswith("synth_") for c in result.candidates)
    assert any("synthesized: needs HiGHS" in s for s in result.skipped)


def test_every_winner_is_measured_against_simulate_nccl(tmp_path):
    """The 'vs nccl' column is simulate nccl's time of NCCL's own choice over the winner's,
    filled at every sample; where NCCL's choice (NVLS on Hopper) beats every candidate the
    notes say so."""
    from msccl_py.tuning.nccl import simulate_nccl
    result = tune("allreduce", "dgx-h100", tmp_path / "out", programs=["allreduce_ring"],
                  sizes="1KiB,1GiB", instances=(1,), channels=(1,))
    nccl = simulate_nccl("dgx-h100", "allreduce", [1 << 10, 1 << 30])
    assert result.nccl_us == pytest.approx([r.time_us for r in nccl])
    assert result.nccl_runs[1] == "NVLS/Simple x16"
    assert any(n.startswith("NCCL's own choice (") and "NVLS/Simple x16" in n
               and "faster than every candidate" in n and "1 GiB" in n for n in result.notes)
    text = (tmp_path / "out" / REPORT / "tune.txt").read_text()
    row = next(line for line in text.splitlines() if "@1GiB" in line)
    assert row.split()[-1].endswith("x") and float(row.split()[-1][:-1]) < 1.0


def test_nccl_baseline_under_a_layout_and_where_it_cannot_be_built(tmp_path):
    from msccl_py.topologies import load
    from msccl_py.tuning.tune import NcclBaseline
    result = tune("allreduce", "dgx-a100", tmp_path / "out", programs=["allreduce_ring"],
                  sizes="1MiB", instances=(1,), channels=(1,), gpus_per_node=4)
    assert len(result.nccl_us) == 1 and result.nccl_why == ""   # NCCL on the 4 GPUs used
    topo = load("dgx-a100")
    none = NcclBaseline("gather", topo, machine_model(topo))
    assert none(1 << 20) is None and "gather" in none.why
