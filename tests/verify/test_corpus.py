"""Every corpus XML file, read and verified, against a verdict table decided by hand.

How each non-ok verdict was decided (independently of the verifier: by
reading the files and with the slice-level simulator in independent.py):

* ns3-msccl__allreduce_ring_2_1: only ``s``/``r`` steps, no reduction at all;
  each rank's tb 0 sends chunk k and receives the peer's other chunk into the
  same slot, a swap. Rank 0 chunk 0 ends as (1, 1).
* ns3-msccl-data__ar_allpair_simple_x_1: every pair's threadblocks both
  start with a send of 8 chunks. Simple FIFOs hold 2 transfers, so with large
  messages (8 transfers per send) both sides block; LL128 (8 transfers) and
  small messages (1 transfer) are fine, so its LL128 sibling is ok.
* ns3-msccl-data__all2all / all2one / peer2peer: declared allgather over 8
  ranks with nchunksperloop 14, 14 and 2, which no 8-rank allgather can
  have; they are pairwise exchanges (all pairs, all-to-rank-0, neighbour
  pairs) written for a network simulator.
* ns3-msccl__allreduce_hierarchical_54_1 / _64_1: 107 and 127 steps in a
  threadblock: fine for the original runtime (256) but past the 64 of
  msccl-executor and RCCL.
* msccl-scheduler LL/ap files: large messages are outside their maxBytes.
"""

from pathlib import Path

import numpy as np
import pytest

from msccl_py.runtime import reference
from msccl_py.runtime.expected import expected
from msccl_py.plan.tables import plan_for
from msccl_py.verify import safe_max_bytes, verify
from msccl_py.targets.msccl import read_xml

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "xml"
FILES = sorted(CORPUS.glob("*.xml")) if CORPUS.is_dir() else []
needs_corpus = pytest.mark.skipif(not FILES, reason="../shared/corpus/xml is not present")

OK = ("ok", "postcondition holds")
#: file stem -> target -> (status, text the reason must contain)
TABLE = {
    "ns3-msccl__allreduce_ring_2_1": ("incorrect", ("rank 0 output chunk 0 holds {(1,1)} but "
                                                    "should hold {(0,0) (1,0)}")),
    "ns3-msccl-data__ar_allpair_simple_x_1": ("deadlock", ("deadlocks with large messages: "
                                                           "rank 0 tb 2 step 0 (send")),
    "ns3-msccl-data__all2all": ("invalid", ("allgather needs nchunksperloop divisible by ngpus; "
                                            "14 is not a multiple of 8")),
    "ns3-msccl-data__all2one": ("invalid", "14 is not a multiple of 8"),
    "ns3-msccl-data__peer2peer": ("invalid", "2 is not a multiple of 8"),
}
LIMITED = {"ns3-msccl__allreduce_hierarchical_54_1": 107,
           "ns3-msccl__allreduce_hierarchical_64_1": 127}
#: files whose large-message regime lies outside their [minBytes, maxBytes]
SMALL_ONLY = {"msccl-scheduler__ncv4__ar_tree_12_LL", "msccl-scheduler__ndv4__a2a2ll",
              "msccl-scheduler__ndv4__a2a4ll", "msccl-scheduler__ndv4__ag-16m",
              "msccl-scheduler__ndv4__ag-2m", "msccl-scheduler__ndv4__ag-4m",
              "msccl-scheduler__ndv4__ag-8m", "msccl-scheduler__ndv4__ap-1pass",
              "msccl-scheduler__ndv4__ap2ll", "msccl-scheduler__ndv4__ap4ll",
              "msccl-scheduler__ndv4__r48ll", "msccl-scheduler__ndv4__r48ll128",
              "rccl-unittest__all-reduce-ring-ll", "rccl-unittest__all-reduce-ring-ll128"}


def target_of(stem: str) -> str:
    return "rccl" if stem.startswith("rccl") else "msccl"


@needs_corpus
def test_table_covers_corpus():
    stems = {p.stem for p in FILES}
    assert set(TABLE) <= stems and set(LIMITED) <= stems and SMALL_ONLY <= stems
    assert len(FILES) >= 38


@needs_corpus
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_verdict(path):
    alg = read_xml(path)
    status, text = TABLE.get(path.stem, OK)
    v = verify(alg, target=target_of(path.stem))
    assert v.status == status, v.report()
    assert text in v.reason
    if status in ("ok", "deadlock"):
        assert set(v.regimes) == {"small", "large"}
        assert v.regimes["large"].reachable == (path.stem not in SMALL_ONLY)
        assert v.regimes["small"].deadlock_free


@needs_corpus
@pytest.mark.parametrize("stem", ["ns3-msccl-data__all2all", "ns3-msccl-data__all2one",
                                  "ns3-msccl-data__peer2peer"])
def test_not_an_allgather_but_a_sound_exchange(stem):
    v = verify(read_xml(CORPUS / f"{stem}.xml"), target="msccl")
    assert v.status == "invalid"
    assert ("read as a custom collective, its structure is sound and it is deadlock-free "
            "with small and large messages") in v.reason
    assert all(r.deadlock_free for r in v.regimes.values())


@needs_corpus
@pytest.mark.parametrize("stem,steps", sorted(LIMITED.items()))
def test_step_limits_of_newer_runtimes(stem, steps):
    alg = read_xml(CORPUS / f"{stem}.xml")
    for target in ("msccl-executor", "rccl"):
        v = verify(alg, target=target)
        assert v.status == "invalid"
        assert f"has {steps} steps" in v.reason and "at most 64" in v.reason
        assert "(otherwise ok: allreduce postcondition holds" in v.reason


@needs_corpus
def test_deadlock_cycle_is_minimal_pair():
    alg = read_xml(CORPUS / "ns3-msccl-data__ar_allpair_simple_x_1.xml")
    v = verify(alg, target="msccl")
    cyc = v.regimes["large"].cycle
    assert len(cyc) == 2
    assert {(w.rank, w.tb) for w in cyc} == {(0, 2), (2, 1)}
    assert all("room in the FIFO" in w.waits_for for w in cyc)
    # the compiler's bound: small-regime sizes only; 64 chunks, 8 per step, Simple
    assert safe_max_bytes(alg, v) == 64 * ((4 << 20) // 8 * 4 // 8)
    sibling = verify(read_xml(CORPUS / "ns3-msccl-data__ar_allpair_LL128_x_1.xml"),
                     target="msccl")
    assert sibling.ok and safe_max_bytes(alg, sibling) is None


def _correct_files():
    return [p for p in FILES if TABLE.get(p.stem, OK)[0] == "ok"]


@needs_corpus
@pytest.mark.parametrize("path", _correct_files(), ids=[p.stem for p in _correct_files()])
def test_reference_runtime_matches_numpy(path):
    alg = read_xml(path)
    cc = plan_for(alg).call_chunks
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.int32):
        for op in ("sum", "max"):
            inputs = [rng.integers(-20, 20, int(cc[r, 0]) * 3).astype(dtype)
                      for r in range(alg.ngpus)]
            for inplace in [m for m, declared in ((True, alg.inplace), (False, alg.outofplace))
                            if declared]:
                outs = reference.run(alg, inputs, op=op, inplace=inplace)
                for o, e in zip(outs, expected(alg, inputs, op)):
                    np.testing.assert_array_equal(o, e)
