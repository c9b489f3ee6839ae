"""Writer layout, reader semantics and round trips over hand-built IR."""

from __future__ import annotations

import re

import pytest

from msccl_py import ir
from msccl_py.errors import LimitError, XmlError
from msccl_py.targets.msccl import (DIALECTS, MAX_BYTES_UNBOUNDED, read_xml, s_to_ir_index, summary,
                                    write_xml)

L = ir.Loc


def every_op_algorithm(collective: str = "reduce_scatter") -> ir.Algorithm:
    """Two ranks, every op, unknown locations, multi-dependencies and self-dependencies."""
    g0 = ir.Gpu(0, 4, 2, 3, [
        ir.Threadblock(0, send_peer=1, recv_peer=1, channel=0, steps=[
            ir.Step("send", L("i", 0), L("s", 0), 2, has_dependents=True),
            ir.Step("recv", L("i", 1), L("s", 1), 1),
            ir.Step("recv_copy_send", None, L("o", 1), 1, depends=[(1, 0)]),
            ir.Step("recv_reduce_send", L("i", 2), None, 1, depends=[(1, 1), (1, 2), (0, 0)]),
            ir.Step("recv_reduce_copy", L("s", 2), L("i", 3), 1, has_dependents=True),
            ir.Step("recv_reduce_copy_send", L("i", 3), L("o", 0), 1),
        ]),
        ir.Threadblock(1, channel=1, steps=[
            ir.Step("copy", L("i", 0), L("s", 2), 1, has_dependents=True),
            ir.Step("reduce", L("s", 0), L("i", 1), 1, depends=[(0, 0)], has_dependents=True),
            ir.Step("reduce", L("s", 1), L("i", 1), 1, has_dependents=True),
            ir.Step("reduce", L("s", 2), L("i", 1), 0, depends=[(0, 4), (0, 1)]),
        ]),
    ])
    g1 = ir.Gpu(1, 4, 2, 0, [
        ir.Threadblock(0, send_peer=0, recv_peer=0, channel=0, steps=[
            ir.Step("recv", None, None, 2),
            ir.Step("send", L("i", 1), L("i", 1), 1),
            ir.Step("send", L("o", 1), L("o", 1), 1),
            ir.Step("send", L("i", 2), L("i", 2), 1),
            ir.Step("recv", L("i", 3), L("s", 2), 1),
            ir.Step("send", L("o", 0), L("o", 0), 1),
        ]),
        ir.Threadblock(1, channel=1),
    ])
    return ir.Algorithm("every op & <all> \"kinds\"", collective, "LL128", False, 2, 4, 2,
                        [g0, g1], outofplace=True, min_bytes=128, max_bytes=0)


def steps_of(text: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'(\w+)="([^"]*)"', ln)) for ln in text.splitlines()
            if ln.lstrip().startswith("<step ")]


# --------------------------------------------------------------------------- layout

@pytest.mark.parametrize("target", list(DIALECTS))
def test_layout_follows_the_runtime_tokenizer_rules(target):
    text = write_xml(every_op_algorithm("allreduce"), target)
    assert not text.startswith("<?xml")
    assert text.endswith("</algo>\n")
    lines = text.splitlines()
    indent = {"algo": 0, "/algo": 0, "gpu": 2, "/gpu": 2, "tb": 4, "/tb": 4, "step": 6}
    for line in lines:
        m = re.fullmatch(r"( *)<(/?\w+)((?: \w+=\"[^\"]*\")*)(/?)>", line)
        assert m, line
        assert len(m.group(1)) == indent[m.group(2)], line
        assert (m.group(4) == "/") == (m.group(2) == "step"), line
        assert "'" not in line and "  " not in line.strip() and "\t" not in line
    step_keys = ["s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps",
                 "hasdep"]
    assert all(list(st) == step_keys for st in steps_of(text))
    algo = dict(re.findall(r'(\w+)="([^"]*)"', lines[0]))
    assert list(algo) == ["name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll",
                          "inplace", "outofplace", "minBytes", "maxBytes"]
    assert algo["maxBytes"] == str(MAX_BYTES_UNBOUNDED) and algo["minBytes"] == "128"


@pytest.mark.parametrize("target,spelling", [("msccl", "reduce_scatter"),
                                             ("msccl-executor", "reducescatter"),
                                             ("rccl", "reducescatter")])
def test_reduce_scatter_spelling_per_dialect(target, spelling):
    text = write_xml(every_op_algorithm("reduce_scatter"), target)
    assert f' coll="{spelling}" ' in text.splitlines()[0]
    assert read_xml(text).collective == "reduce_scatter"


def test_extra_dependencies_become_one_nop_each_before_the_step():
    alg = every_op_algorithm()
    steps = steps_of(write_xml(alg))
    tb0 = steps[:8]   # gpu 0 tb 0: 6 steps + 2 nops for the 3-dependency step
    assert [st["type"] for st in tb0] == ["s", "r", "rcs", "nop", "nop", "rrs", "rrc", "rrcs"]
    assert [st["s"] for st in tb0] == [str(i) for i in range(8)]
    # (1, 1) and (1, 2) ride on nops; the step keeps the last, (0, 0); targets are XML s
    # indices of threadblock 1, whose step 3 has two dependencies and so sits at s=4
    assert [(st["depid"], st["deps"]) for st in tb0[3:6]] == [("1", "1"), ("1", "2"), ("0", "0")]
    assert all(st["hasdep"] == "0" and st["cnt"] == "0" and st["srcoff"] == "-1"
               for st in tb0[3:5])
    tb1 = steps[8:13]
    assert [st["type"] for st in tb1] == ["cpy", "re", "re", "nop", "re"]
    # (0, 4) is rrc, at XML s 6 of threadblock 0 because of the two nops before it
    assert [(st["depid"], st["deps"]) for st in tb1[3:]] == [("0", "6"), ("0", "1")]


def test_xml_s_matches_ir_mapping_functions():
    alg = every_op_algorithm()
    steps = steps_of(write_xml(alg))
    pos = 0
    for _, tb in alg.threadblocks():
        s_of = ir.xml_step_index(tb)
        back = s_to_ir_index(tb)
        written = steps[pos:pos + len(back)]
        pos += len(back)
        real = [int(st["s"]) for st in written if st["type"] != "nop"]
        assert real == s_of
        assert [back[s] for s in s_of] == list(range(len(tb.steps)))
    assert pos == len(steps)


def test_unknown_locations_are_written_as_offset_minus_one():
    steps = steps_of(write_xml(every_op_algorithm()))
    rcs = steps[2]
    assert (rcs["srcbuf"], rcs["srcoff"], rcs["dstbuf"], rcs["dstoff"]) == ("i", "-1", "o", "1")
    rrs = steps[5]
    assert (rrs["dstbuf"], rrs["dstoff"]) == ("o", "-1")


# --------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("target", list(DIALECTS))
@pytest.mark.parametrize("collective", ["reduce_scatter", "allreduce", "alltoall"])
def test_hand_built_round_trip(target, collective):
    alg = every_op_algorithm(collective)
    text = write_xml(alg, target)
    back = read_xml(text)
    assert back == alg
    assert write_xml(back, target) == text


def test_bounded_max_bytes_is_written_literally_and_zero_reads_back_as_unbounded():
    alg = every_op_algorithm("allreduce")
    alg.max_bytes = 12287
    text = write_xml(alg)
    assert 'maxBytes="12287"' in text and read_xml(text).max_bytes == 12287
    zero = text.replace('maxBytes="12287"', 'maxBytes="0"')
    assert read_xml(zero).max_bytes == 0
    huge = text.replace('maxBytes="12287"', f'maxBytes="{MAX_BYTES_UNBOUNDED * 4}"')
    assert read_xml(huge).max_bytes == 0


def tiny(steps: str, tb_attrs: str = 'send="-1" recv="-1" chan="0"', extra: str = "") -> str:
    """One rank, tb 0 with ``steps`` (one per line) and a second tb 1 with a single copy."""
    return (f'<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="1" '
            f'coll="allreduce" inplace="1"{extra}>\n'
            f'  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="2">\n'
            f'    <tb id="0" {tb_attrs}>\n{steps}    </tb>\n'
            f'    <tb id="1" send="-1" recv="-1" chan="0">\n'
            f'      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" '
            f'depid="-1" deps="-1" hasdep="1"/>\n'
            f'      <step s="1" type="cpy" srcbuf="i" srcoff="1" dstbuf="s" dstoff="1" cnt="1" '
            f'depid="-1" deps="-1" hasdep="1"/>\n'
            f'    </tb>\n  </gpu>\n</algo>\n')


def step(s, kind="cpy", depid=-1, deps=-1, hasdep=0, cnt=1, src=("i", 0), dst=("s", 0)):
    return (f'      <step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" '
            f'dstbuf="{dst[0]}" dstoff="{dst[1]}" cnt="{cnt}" depid="{depid}" deps="{deps}" '
            f'hasdep="{hasdep}"/>\n')


def test_old_format_defaults():
    alg = read_xml(tiny(step(0)))
    assert alg.inplace and not alg.outofplace
    assert (alg.min_bytes, alg.max_bytes) == (0, 0)
    assert 'outofplace="0" minBytes="0" maxBytes="1099511627776"' in write_xml(alg)


def test_unknown_attributes_elements_comments_and_declaration_are_ignored():
    text = tiny(step(0).replace("/>", ' extra="9"/>') + "      <note/>\n<!-- c -->\n",
                extra=' maxcount="1" nthreadblocks="2"')
    alg = read_xml('<?xml version="1.0" encoding="UTF-8"?>\n<!-- header -->\n' + text)
    assert alg.gpus[0].threadblocks[0].steps == [ir.Step("copy", L("i", 0), L("s", 0), 1)]


def test_nops_fold_into_the_next_step_in_order():
    text = tiny(step(0, "nop", 1, 0) + step(1, "nop", 1, 1) + step(2, "re", 1, 0))
    st = read_xml(text).gpus[0].threadblocks[0].steps
    assert len(st) == 1 and st[0].op == "reduce"
    assert st[0].depends == [(1, 0), (1, 1), (1, 0)]


def test_dependency_on_a_nop_targets_the_step_it_precedes():
    # tb 0: s0 copy, s1 nop, s2 copy(hasdep); tb 1 s1 waits for tb 0 s1 (the nop)
    tb0 = step(0) + step(1, "nop", 1, 0) + step(2, depid=1, deps=1, hasdep=1)
    text = tiny(tb0).replace('dstoff="1" cnt="1" depid="-1" deps="-1"',
                             'dstoff="1" cnt="1" depid="0" deps="1"')
    alg = read_xml(text)
    assert alg.gpus[0].threadblocks[1].steps[1].depends == [(0, 1)]
    # written back, the wait names the real step's s (2): released by the same flag
    assert 'depid="0" deps="2"' in write_xml(alg)


def test_nop_hasdep_is_ignored_and_trailing_nops_are_dropped():
    text = tiny(step(0) + step(1, "nop", 1, 0, hasdep=1) + step(2, depid=1, deps=1)
                + step(3, "nop", 1, 1))
    steps = read_xml(text).gpus[0].threadblocks[0].steps
    assert len(steps) == 2
    assert steps[1].depends == [(1, 0), (1, 1)] and not steps[1].has_dependents


def test_dependency_on_a_step_without_hasdep_is_kept():
    alg = read_xml(tiny(step(0, depid=1, deps=0)).replace('hasdep="1"', 'hasdep="0"'))
    assert alg.gpus[0].threadblocks[0].steps[0].depends == [(1, 0)]


def test_summary_names_the_shape():
    text = summary(every_op_algorithm())
    first = text.splitlines()[0]
    assert "reduce_scatter" in first and "2 ranks" in first and "LL128" in first
    assert "2 channels" in first and "4 chunks per loop" in first
    rows = [ln.split() for ln in text.splitlines() if re.match(r"\s+\d+\s", ln)]
    # rank, tbs, steps, xml-steps, max/tb, chunks
    assert rows[0] == ["0", "2", "10", "13", "8", "4", "2", "3"]
    assert rows[1] == ["1", "2", "6", "6", "6", "4", "2", "0"]
    assert "total: 4 threadblocks, 16 steps, 19 XML steps" in text
    assert "out-of-place" in text and "sizes 128 B .. unbounded" in text


# --------------------------------------------------------------------------- writer errors

def test_writer_refuses_bad_ir():
    alg = every_op_algorithm()
    alg.gpus[0].threadblocks[1].steps[3].depends.append((5, 0))
    with pytest.raises(XmlError, match=r"gpu 0 threadblock 1 step 3 depends on step 0 of "
                                       r"threadblock 5"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[1].threadblocks[0].steps[1].depends = [(0, 6)]
    with pytest.raises(XmlError, match="step 6 of threadblock 0"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[0].threadblocks[0].steps[0].op = "fly"
    with pytest.raises(XmlError, match="gpu 0 threadblock 0 step 0: unknown op 'fly'"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[0].threadblocks[0].steps[1].dst = L("s", -1)
    with pytest.raises(XmlError, match="step 1: dst"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[0].threadblocks[0].steps[1].src = L("x", 0)
    with pytest.raises(XmlError, match="step 1: src"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus.reverse()
    with pytest.raises(XmlError, match="gpu at position 0 has rank 1"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[1].threadblocks[1].id = 7
    with pytest.raises(XmlError, match="gpu 1: threadblock at position 1 has id 7"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.protocol = "Fast"
    with pytest.raises(XmlError, match="unknown protocol 'Fast'"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.name = "bad\x01name"
    with pytest.raises(XmlError, match="control character"):
        write_xml(alg)
    with pytest.raises(XmlError, match="unknown XML target 'nccl'"):
        write_xml(every_op_algorithm(), "nccl")
    alg = every_op_algorithm()
    alg.gpus[1].threadblocks[0].send_peer = 1
    with pytest.raises(XmlError, match="gpu 1 threadblock 0 send_peer is 1; a peer is -1 or "
                                       "another rank in 0..1"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[0].threadblocks[0].steps[2].count = 1.5
    with pytest.raises(XmlError, match="gpu 0 threadblock 0 step 2: count must be an integer"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[0].threadblocks[0].steps[2].depends = [(1, 0, 0)]
    with pytest.raises(XmlError, match=r"step 2: dependency \(1, 0, 0\) is not a"):
        write_xml(alg)
    alg = every_op_algorithm()
    alg.gpus[0].scratch_chunks = -1
    with pytest.raises(XmlError, match="gpu 0 scratch_chunks is negative"):
        write_xml(alg)


def test_writer_lines_of_steps_sharing_locations():
    a, b = L("i", 0), L("o", 1)   # one object each, as the compiler interns them
    steps = [ir.Step("copy", a, b), ir.Step("copy", a, b, has_dependents=True),
             ir.Step("copy", a, b, 2), ir.Step("copy", a, b, depends=[(1, 0)]),
             ir.Step("copy", a, b)]
    tbs = [ir.Threadblock(0, steps=steps), ir.Threadblock(1, steps=[ir.Step("copy", b, a)])]
    alg = ir.Algorithm("share", "custom", "Simple", False, 1, 2, 1,
                       [ir.Gpu(0, 2, 2, threadblocks=tbs)])
    text = write_xml(alg, "msccl")
    lines = [ln.strip() for ln in text.splitlines() if "<step" in ln]
    tail = 'type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1"'
    assert lines[:5] == [
        f'<step s="0" {tail} cnt="1" depid="-1" deps="-1" hasdep="0"/>',
        f'<step s="1" {tail} cnt="1" depid="-1" deps="-1" hasdep="1"/>',
        f'<step s="2" {tail} cnt="2" depid="-1" deps="-1" hasdep="0"/>',
        f'<step s="3" {tail} cnt="1" depid="1" deps="0" hasdep="0"/>',
        f'<step s="4" {tail} cnt="1" depid="-1" deps="-1" hasdep="0"/>']
    assert read_xml(text) == alg
    steps[4].count = True   # equal to 1, but not a count
    with pytest.raises(XmlError, match="threadblock 0 step 4: count must be an integer"):
        write_xml(alg, "msccl")
    steps[4].count = 1
    tbs[1].steps[0].src = L("x", 0)   # a bad location after good ones
    with pytest.raises(XmlError, match="threadblock 1 step 0: src"):
        write_xml(alg, "msccl")


def test_writer_accepts_numpy_integers():
    np = pytest.importorskip("numpy")
    alg = every_op_algorithm()
    tb = alg.gpus[0].threadblocks[1]
    tb.steps[0].src = L("i", np.int64(0))
    tb.steps[0].count = np.int32(1)
    tb.steps[1].depends = [(np.int64(0), np.int64(0))]
    assert read_xml(write_xml(alg)) == every_op_algorithm()


def test_writer_refuses_programs_over_the_target_limits():
    alg = every_op_algorithm("allreduce")
    tb = alg.gpus[1].threadblocks[1]
    tb.steps = [ir.Step("copy", L("i", 0), L("s", 0)) for _ in range(63)]
    tb.steps.append(ir.Step("copy", L("i", 0), L("s", 0), depends=[(0, 0), (0, 1)]))
    assert read_xml(write_xml(alg, "msccl")) == alg       # 65 XML steps fit msccl (256)
    with pytest.raises(LimitError, match="gpu 1 threadblock 1 has 65 steps \\(nops included\\); "
                                         "target msccl-executor allows at most 64"):
        write_xml(alg, "msccl-executor")


# --------------------------------------------------------------------------- speed

def big_algorithm(ngpus: int = 8, ntb: int = 50, nsteps: int = 200) -> ir.Algorithm:
    gpus = []
    for r in range(ngpus):
        tbs = []
        for t in range(ntb):
            steps = [ir.Step("recv_reduce_copy_send" if k % 3 else "send", L("i", k % 7),
                             L("s", k % 5), 1 + k % 4,
                             depends=[((t + 1) % ntb, k)] if k % 5 == 0 else
                             [((t + 1) % ntb, k - 1), ((t + 2) % ntb, k - 2)] if k % 7 == 0
                             else [], has_dependents=k % 2 == 0)
                     for k in range(nsteps)]
            tbs.append(ir.Threadblock(t, (r + 1) % ngpus, (r - 1) % ngpus, t % 32, steps))
        gpus.append(ir.Gpu(r, 7, 0, 5, tbs))
    return ir.Algorithm("big", "allreduce", "Simple", True, ngpus, 7, 32, gpus)


@pytest.mark.slow  # 130k steps; the corpus and property round trips run by default
def test_big_algorithm_round_trips():
    # speed is measured by benchmarks/xml_speed.py, not asserted here
    alg = big_algorithm()
    assert read_xml(write_xml(alg, "msccl")) == alg


def test_dependence_nop_hoists_reduce_waits_to_the_first_reduce():
    def red(o, deps=()):
        return ir.Step("reduce", L("s", o), L("i", 0), depends=list(deps))

    tb0 = ir.Threadblock(0, steps=[ir.Step("copy", L("i", 1), L("s", 9), has_dependents=True),
                                   red(0, [(1, 0)]),
                                   ir.Step("copy", L("i", 2), L("s", 8), depends=[(1, 1)]),
                                   red(1, [(1, 1), (0, 0)]), red(2, [(1, 0), (1, 2)])])
    tb1 = ir.Threadblock(1, steps=[ir.Step("copy", has_dependents=True) for _ in range(3)])
    alg = ir.Algorithm("h", "allreduce", "LL", True, 1, 3, 1,
                       [ir.Gpu(0, 3, 0, 10, [tb0, tb1])])
    before = str(alg)
    text = write_xml(alg, "msccl", dependence_nop=True)
    assert str(alg) == before                      # the input IR is left alone
    back = read_xml(text)
    steps = back.gpus[0].threadblocks[0].steps
    # the wait on its own threadblock (0, 0) is dropped, duplicates once, own dep last
    assert steps[1].depends == [(1, 1), (1, 2), (1, 0)]
    assert steps[2].depends == [(1, 1)] and steps[3].depends == [] and steps[4].depends == []
    assert [st["type"] for st in steps_of(text)[:6]] == ["cpy", "nop", "nop", "re", "cpy", "re"]
    assert write_xml(back, "msccl") == text


def test_writer_cached_lines_follow_each_steps_own_fields():
    # threadblocks repeating another's lines are written from the line cache; a step
    # whose fields only compare equal to a cached one's must still get its own text
    a, b = L("i", 0), L("o", 1)
    def tb(t, steps):
        return ir.Threadblock(t, steps=steps)
    first = [ir.Step("copy", a, b), ir.Step("copy", b, a, has_dependents=True)]
    again = [ir.Step("copy", a, b), ir.Step("copy", b, a, has_dependents=True)]
    odd = [ir.Step("copy", a, b, has_dependents=1), ir.Step("copy", b, a, has_dependents=0),
           ir.Step("copy", a, b, depends=[(3, 1)])]
    late = [ir.Step("copy", b, a), ir.Step("copy", a, b, depends=[(0, 0), (1, 0)])]
    alg = ir.Algorithm("cache", "custom", "Simple", False, 1, 2, 1,
                       [ir.Gpu(0, 2, 2, threadblocks=[tb(0, first), tb(1, again), tb(2, odd),
                                                      tb(3, late)])])
    got = [(st["s"], st["srcbuf"], st["hasdep"], st["depid"], st["deps"])
           for st in steps_of(write_xml(alg, "msccl"))]
    assert got == [("0", "i", "0", "-1", "-1"), ("1", "o", "1", "-1", "-1"),
                   ("0", "i", "0", "-1", "-1"), ("1", "o", "1", "-1", "-1"),
                   ("0", "i", "1", "-1", "-1"), ("1", "o", "0", "-1", "-1"),
                   ("2", "i", "0", "3", "2"),  # step 1 of tb 3 sits after its nop
                   ("0", "o", "0", "-1", "-1"), ("1", "i", "0", "0", "0"),
                   ("2", "i", "0", "1", "0")]
    odd[1].count = 1.0   # equal to a cached line's count, but not an integer
    with pytest.raises(XmlError, match="threadblock 2 step 1: count must be an integer"):
        write_xml(alg, "msccl")
