"""Every real MSCCL XML file in the shared corpus reads, and round-trips through the writer."""

from __future__ import annotations

import copy
import time

import pytest

from msccl_py.errors import LimitError
from msccl_py.targets.msccl import (DIALECTS, check_limits, hoist_reduce_dependencies,
                                    read_xml, summary, write_xml)
from repo_paths import SHARED

CORPUS = SHARED / "corpus" / "xml"
FILES = sorted(CORPUS.glob("*.xml")) if CORPUS.is_dir() else []

pytestmark = pytest.mark.skipif(not FILES, reason="shared corpus not present")


def fitting_targets(alg) -> list[str]:
    out = []
    for name in DIALECTS:
        try:
            check_limits(alg, name)
        except LimitError:
            continue
        out.append(name)
    return out


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_round_trip(path):
    alg = read_xml(path)
    assert alg.num_steps() > 0 and len(alg.gpus) == alg.ngpus
    targets = fitting_targets(alg)
    assert targets, f"{path.name} fits no dialect"
    for target in targets:
        text = write_xml(alg, target)
        back = read_xml(text)
        assert back == alg                        # read -> write -> read: same IR
        assert write_xml(back, target) == text    # write -> read -> write: same bytes


def test_files_in_our_layout_are_reproduced_byte_for_byte():
    """msccl-tools wrote these in the layout the runtimes tokenize; ours must be identical."""
    same = [p for p in FILES if p.name.startswith("msccl-scheduler__")
            and "<!--" not in p.read_text()]
    assert len(same) >= 10
    for path in same:
        original = path.read_text().rstrip("\n") + "\n"   # some lack the final newline
        assert write_xml(read_xml(path), "msccl-executor") == original, path.name


def test_nops_fold_into_the_fused_reduction():
    alg = read_xml(CORPUS / "msccl-scheduler__ndv4__ap-1pass.xml")
    tb = alg.gpus[0].threadblocks[0]
    # 12 nops and the first reduction's own dependency: 13 waits, then 6 more reductions
    assert [st.op for st in tb.steps] == ["reduce"] * 7
    assert len(tb.steps[0].depends) == 13 and all(not st.depends for st in tb.steps[1:])
    assert tb.steps[0].depends[0] == (8, 0) and tb.steps[0].depends[-1] == (20, 0)
    lines = write_xml(alg).splitlines()
    assert sum('type="nop"' in ln for ln in lines) == 2656


def test_old_format_and_rccl_extras():
    old = read_xml(CORPUS / "ns3-msccl__allreduce_ring_8_1.xml")
    assert old.inplace and not old.outofplace and old.max_bytes == 0
    rccl = read_xml(CORPUS / "rccl-unittest__all-reduce-ring-simple.xml")
    assert (rccl.ngpus, rccl.nchannels, rccl.min_bytes, rccl.max_bytes) == (16, 24, 393216, 0)
    assert rccl.inplace and rccl.outofplace


def test_oversized_corpus_files_are_refused_by_the_newer_targets():
    alg = read_xml(CORPUS / "ns3-msccl__allreduce_hierarchical_64_1.xml")
    assert fitting_targets(alg) == ["msccl"]
    with pytest.raises(LimitError, match=r"gpu 0 threadblock 0 has 127 steps \(nops included\); "
                                         r"target rccl allows at most 64"):
        write_xml(alg, "rccl")


def test_reading_the_16_rank_rccl_file_is_fast():
    path = CORPUS / "rccl-unittest__all-reduce-ring-ll.xml"
    t0 = time.process_time()
    alg = read_xml(path)
    elapsed = time.process_time() - t0
    assert alg.num_steps() == 11904
    print(f"\nread {alg.num_steps()} steps in {elapsed * 1000:.0f} ms "
          f"({alg.num_steps() / elapsed:,.0f} steps/s)")
    assert elapsed < 1.0


def test_summary_of_a_corpus_file():
    text = summary(read_xml(CORPUS / "ns3-msccl__allreduce_ring_2_1.xml"))
    assert text.splitlines()[0] == ("allreduce_ring_inplace: allreduce, 2 ranks, protocol Simple, "
                                    "2 channels, 2 chunks per loop")
    assert "ops: recv 4, send 4" in text
    assert "total: 4 threadblocks, 8 steps, 8 XML steps" in text
    assert "target rccl: within limits" in text
    text = summary(read_xml(CORPUS / "ns3-msccl__allreduce_hierarchical_54_1.xml"))
    assert "target msccl: within limits" in text
    assert ("target msccl-executor: exceeds limits: gpu 0 threadblock 0 has 107 steps (nops "
            "included); target msccl-executor allows at most 64") in text


def test_dependence_nop_reproduces_the_msccl_tools_allpairs_file():
    """ap-1pass was written by msccl-tools with dependence_nop: undo the hoisting, redo it."""
    path = CORPUS / "msccl-scheduler__ndv4__ap-1pass.xml"
    hoisted = read_xml(path)
    plain = copy.deepcopy(hoisted)
    for _, tb in plain.threadblocks():
        reduces = [st for st in tb.steps if st.op == "reduce"]
        if not reduces or not reduces[0].depends:
            continue
        *rest, own = reduces[0].depends
        reduces[0].depends = [own]
        for k, dep in enumerate(rest):   # spread the waits, in order, over the later ones
            reduces[1 + k * (len(reduces) - 1) // len(rest)].depends.append(dep)
    assert plain != hoisted
    assert hoist_reduce_dependencies(plain) == hoisted
    assert hoist_reduce_dependencies(hoisted) == hoisted
    text = write_xml(plain, "msccl-executor", dependence_nop=True)
    assert text == path.read_text().rstrip("\n") + "\n"
    assert write_xml(plain, "msccl-executor") != text
