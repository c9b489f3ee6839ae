"""tune's candidate set and admission: --candidates adds to the library (--only-candidates
replaces it), a layout skips the whole-machine NCCL programs with the right reason, and no
file wins a range whose powers of two its chunk count cannot take."""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.cli import main
from msccl_py.errors import MscclError
from msccl_py.tuning.tune import tune

SIZES = "1MiB:16MiB"


@pytest.fixture(scope="module")
def mine(tmp_path_factory):
    d = tmp_path_factory.mktemp("mine")
    (d / "pairs.xml").write_text(library.compile_xml("allreduce_allpairs", 8))
    return d


def test_candidates_join_the_library(mine, tmp_path):
    both = tune("allreduce", "dgx-h100", tmp_path / "a", candidates_dir=mine,
                programs=["allreduce_ring"], sizes=SIZES, instances=(1,), channels=(1,))
    labels = [c.label for c in both.candidates]
    assert "pairs LL" in labels, labels
    assert any(label.startswith("allreduce_ring") for label in labels), labels
    only = tune("allreduce", "dgx-h100", tmp_path / "b", candidates_dir=mine,
                only_candidates=True, sizes=SIZES)
    assert [c.label for c in only.candidates] == ["pairs LL"]


def test_only_candidates_needs_candidates_and_no_programs(mine, tmp_path, capsys):
    with pytest.raises(MscclError, match="--only-candidates tunes among the XML files"):
        tune("allreduce", "dgx-h100", tmp_path / "c", only_candidates=True)
    assert main(["tune", "--collective", "allreduce", "--topology", "dgx-h100", "-o",
                 str(tmp_path / "d"), "--candidates", str(mine), "--only-candidates",
                 "--programs", "allreduce_ring"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only-candidates tunes among the XML files of --candidates")


def test_layout_skips_whole_machine_programs_saying_why(tmp_path):
    r = tune("allreduce", "dgx-h100", tmp_path, nodes=2, gpus_per_node=2,
             programs=["allreduce_ring", "nccl_ring"], sizes=SIZES, instances=(1,),
             channels=(1,))
    assert "nccl_ring: builds on every GPU of dgx-h100, and the layout runs 2 ranks on each " \
           "machine" in r.skipped
    assert not any("has 16 ranks, the program 4" in s for s in r.skipped)


def test_no_file_wins_powers_of_two_it_cannot_run(tmp_path):
    # on dgx-h100 nccl_ring x2 has 192 chunks: float32 multiples of 768 B, no power of two
    r = tune("allreduce", "dgx-h100", tmp_path, programs=["nccl_ring", "allreduce_ring"],
             sizes="1KiB:256MiB", instances=(1, 2), channels=(1, 4))
    assert any(c.label == "nccl_ring x2 LL" for c in r.candidates)
    for f in r.files:
        runs, calls = f.powers
        assert calls == 0 or runs > 0, (f.path.name, f.powers)
        assert not r.candidates[f.winner].label.startswith("nccl_ring x2"), f.path.name
