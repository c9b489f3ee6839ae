"""Property: any well-formed IR survives write -> read unchanged, in every dialect."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msccl_py import ir
from msccl_py.targets.msccl import DIALECTS, read_xml, s_to_ir_index, write_xml, xml_step_count

OPS = sorted(ir.OP_CODES)
NAME_CHARS = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff")
NAMES = st.text(NAME_CHARS | st.sampled_from("\n\r\t&<>\"'"), max_size=12)


@st.composite
def locations(draw):
    if draw(st.integers(0, 4)) == 0:
        return None
    return ir.Loc(draw(st.sampled_from(ir.BUFFERS)), draw(st.integers(0, 300)))


@st.composite
def algorithms(draw):
    ngpus = draw(st.integers(1, 3))
    nchannels = draw(st.integers(1, 4))
    gpus = []
    for rank in range(ngpus):
        peers = st.sampled_from([-1] + [p for p in range(ngpus) if p != rank])
        sizes = [draw(st.integers(0, 6)) for _ in range(draw(st.integers(0, 3)))]
        tbs = []
        for t, n in enumerate(sizes):
            steps = []
            for _ in range(n):
                deps = draw(st.lists(st.sampled_from(
                    [(u, i) for u, m in enumerate(sizes) for i in range(m)] or [None]),
                    max_size=4))
                steps.append(ir.Step(draw(st.sampled_from(OPS)), draw(locations()),
                                     draw(locations()), draw(st.integers(0, 71)),
                                     [d for d in deps if d is not None], draw(st.booleans())))
            tbs.append(ir.Threadblock(t, draw(peers), draw(peers),
                                      draw(st.integers(0, nchannels - 1)), steps))
        gpus.append(ir.Gpu(rank, draw(st.integers(0, 9)), draw(st.integers(0, 9)),
                           draw(st.integers(0, 9)), tbs))
    inplace = draw(st.booleans())
    max_bytes = draw(st.sampled_from([0, 1, 4096, 2**33]))
    return ir.Algorithm(draw(NAMES), draw(st.sampled_from(["allreduce", "allgather",
                                                           "reduce_scatter", "alltoall",
                                                           "broadcast", "reduce"])),
                        draw(st.sampled_from(ir.PROTOCOLS)), inplace, ngpus,
                        draw(st.integers(0, 500)), nchannels, gpus, draw(st.booleans()),
                        draw(st.integers(0, max_bytes or 2**40)) if max_bytes else
                        draw(st.integers(0, 2**20)), max_bytes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(algorithms(), st.sampled_from(sorted(DIALECTS)))
def test_write_read_is_lossless(alg, target):
    text = write_xml(alg, target)
    back = read_xml(text)
    assert back == alg
    assert write_xml(back, target) == text
    for _, tb in alg.threadblocks():
        index = ir.xml_step_index(tb)
        to_ir = s_to_ir_index(tb)
        assert len(to_ir) == xml_step_count(tb)
        assert all(to_ir[s] == k for k, s in enumerate(index))
