"""Bad MSCCL XML: every failure is an XmlError naming the element and its line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from msccl_py.errors import MscclError, XmlError
from msccl_py.targets.msccl import read_xml
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "xml"

#: a valid two-rank file; the tests replace single lines (numbered from 1)
BASE = [
    '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" '
    'inplace="1" outofplace="0" minBytes="0" maxBytes="0">',                                  # 1
    '  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="1">',                                  # 2
    '    <tb id="0" send="1" recv="1" chan="0">',                                             # 3
    '      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" '
    'deps="-1" hasdep="0"/>',                                                                 # 4
    '      <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="-1" '
    'deps="-1" hasdep="1"/>',                                                                 # 5
    '    </tb>',                                                                              # 6
    '    <tb id="1" send="-1" recv="-1" chan="0">',                                           # 7
    '      <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" '
    'depid="0" deps="0" hasdep="0"/>',                                                        # 8
    '      <step s="1" type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="1" cnt="1" depid="0" '
    'deps="1" hasdep="0"/>',                                                                  # 9
    '    </tb>',                                                                              # 10
    '  </gpu>',                                                                               # 11
    '  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="1">',                                  # 12
    '    <tb id="0" send="0" recv="0" chan="0">',                                             # 13
    '      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="-1" '
    'deps="-1" hasdep="0"/>',                                                                 # 14
    '      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" '
    'deps="-1" hasdep="0"/>',                                                                 # 15
    '    </tb>',                                                                              # 16
    '  </gpu>',                                                                               # 17
    '</algo>',                                                                                # 18
]


def doc(**changes: str) -> str:
    """BASE with line N replaced by ``changes['lN']`` (or ``old=>new`` applied to it)."""
    lines = list(BASE)
    for key, value in changes.items():
        n = int(key[1:]) - 1
        if "=>" in value:
            old, new = value.split("=>")
            assert old in lines[n], (old, lines[n])
            lines[n] = lines[n].replace(old, new)
        else:
            lines[n] = value
    return "\n".join(lines) + "\n"


def fails(text, line: int | None, *fragments: str, file: str | None = None) -> str:
    with pytest.raises(XmlError) as info:
        read_xml(text, file=file)
    message = str(info.value)
    assert info.value.line == line, message
    if line is not None:
        prefix = f"{file}:{line}:" if file else f"line {line}:"
        assert message.startswith(prefix), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_base_document_is_valid():
    alg = read_xml(doc())
    assert alg.gpus[0].threadblocks[1].steps[0].depends == [(0, 0), (0, 1)]


@pytest.mark.parametrize("text,line,fragment", [
    ("<<<>>>", 1, "not well-formed XML"),
    ("<algo name='x'", 1, "not well-formed XML"),
    ("\n".join(BASE[:9]) + "\n      <step s=\"2\" type=", 10, "not well-formed XML"),
    ("\n".join(BASE) + "\n<algo/>", 19, "Extra content"),
    ("<algo><gpu></algo>", 1, "not well-formed XML"),
])
def test_not_xml_or_truncated(text, line, fragment):
    fails(text, line, fragment)


@pytest.mark.parametrize("changes,line,fragments", [
    (dict(l4='cnt="1" =>'), 4, ["<step> is missing attribute 'cnt'"]),
    (dict(l4='type="s" =>'), 4, ["<step> is missing attribute 'type'"]),
    (dict(l9='srcbuf="s" =>'), 9, ["<step> is missing attribute 'srcbuf'"]),
    (dict(l3='chan="0"=>'), 3, ["<tb> is missing attribute 'chan'"]),
    (dict(l12='s_chunks="1"=>'), 12, ["<gpu> is missing attribute 's_chunks'"]),
    (dict(l1='ngpus="2" =>'), 1, ["<algo> is missing attribute 'ngpus'"]),
    (dict(l1='proto="Simple" =>'), 1, ["<algo> is missing attribute 'proto'"]),
])
def test_missing_attribute(changes, line, fragments):
    fails(doc(**changes), line, *fragments)


@pytest.mark.parametrize("changes,line,fragment", [
    (dict(l5='cnt="1"=>cnt="one"'), 5, "<step> attribute cnt='one' is not an integer"),
    (dict(l5='deps="-1"=>deps="1.5"'), 5, "deps='1.5' is not an integer"),
    (dict(l5='srcoff="1"=>srcoff="1_0"'), 5, "srcoff='1_0' is not an integer"),
    (dict(l5='s="1"=>s=" 1"'), 5, "s=' 1' is not an integer"),
    (dict(l13='chan="0"=>chan=""'), 13, "<tb> attribute chan='' is not an integer"),
    (dict(l12='id="1"=>id="x"'), 12, "<gpu> attribute id='x' is not an integer"),
    (dict(l1='nchannels="1"=>nchannels="many"'), 1, "<algo> attribute nchannels='many'"),
])
def test_non_integer_value(changes, line, fragment):
    fails(doc(**changes), line, fragment)


@pytest.mark.parametrize("changes,line,fragment", [
    (dict(l5='type="r"=>type="ra"'), 5, "<step> has unknown type 'ra'"),
    (dict(l5='type="r"=>type="recv"'), 5, "<step> has unknown type 'recv'"),
    (dict(l4='srcbuf="i"=>srcbuf="x"'), 4, "<step> srcbuf='x' is not a buffer; use i, o or s"),
    (dict(l9='dstbuf="i"=>dstbuf="input"'), 9, "<step> dstbuf='input' is not a buffer"),
    (dict(l4='srcoff="0"=>srcoff="-2"'), 4, "srcoff=-2 is negative"),
    (dict(l4='cnt="1"=>cnt="72"'), 4, "<step> cnt=72 is out of range; need 0 <= cnt < 72"),
    (dict(l4='cnt="1"=>cnt="-1"'), 4, "<step> cnt=-1 is out of range"),
    (dict(l5='s="1"=>s="2"'), 5, "<step> s=2 but it is step 1 of threadblock 0"),
    (dict(l4='s="0"=>s="1"', l5='s="1"=>s="0"'), 4, "<step> s=1 but it is step 0"),
    (dict(l5='hasdep="1"=>hasdep="2"'), 5, "<step> hasdep=2; must be 0 or 1"),
    (dict(l5='depid="-1"=>depid="-3"'), 5, "<step> depid=-3; must be -1 or a threadblock id"),
    (dict(l8='depid="0"=>depid="-1"'), 8, "<step> type nop has depid=-1"),
    (dict(l9='depid="0"=>depid="-1"'), 9, "<step> follows 1 nop(s) but has depid=-1"),
])
def test_bad_step(changes, line, fragment):
    fails(doc(**changes), line, fragment)


@pytest.mark.parametrize("changes,line,fragment", [
    (dict(l8='depid="0"=>depid="5"'), 8, "<step> depends on threadblock 5, which gpu 0 does not"),
    (dict(l9='depid="0"=>depid="2"'), 9, "depends on threadblock 2, which gpu 0 does not have"),
    (dict(l9='deps="1"=>deps="2"'), 9, "depends on step 2 of threadblock 0, which has steps 0..1"),
    (dict(l9='deps="1"=>deps="-1"'), 9, "depends on step -1 of threadblock 0"),
])
def test_dependency_on_missing_threadblock_or_step(changes, line, fragment):
    fails(doc(**changes), line, fragment)


def test_dependency_on_a_trailing_nop():
    text = doc(l5=BASE[4] + "\n" + BASE[7].replace('s="0"', 's="2"').replace('depid="0"',
                                                                                'depid="1"'))
    # the nop is now line 6 of tb 0; tb 1 (lines 9..10 after the insert) waits for it
    text = text.replace('dstoff="1" cnt="1" depid="0" deps="1"', 'dstoff="1" cnt="1" depid="0" '
                                                                  'deps="2"')
    fails(text, 10, "depends on step 2 of threadblock 0, a trailing nop")


@pytest.mark.parametrize("changes,line,fragment", [
    (dict(l7='id="1"=>id="0"'), 7, "<tb> id=0 repeats threadblock 0 of gpu 0 (line 3)"),
    (dict(l7='id="1"=>id="2"'), 7, "<tb> id=2 but gpu 0 has no threadblock 1"),
    (dict(l3='id="0"=>id="-1"'), 3, "<tb> id=-1 is negative"),
    (dict(l3='send="1"=>send="0"'), 3, "<tb> send=0 on gpu 0; a peer is -1 or another rank"),
    (dict(l13='recv="0"=>recv="2"'), 13, "<tb> recv=2 on gpu 1"),
    (dict(l13='recv="0"=>recv="-2"'), 13, "<tb> recv=-2 on gpu 1"),
    (dict(l3='chan="0"=>chan="-1"'), 3, "<tb> chan=-1 is negative"),
    (dict(l12='id="1"=>id="0"', l13='send="0" recv="0"=>send="1" recv="1"'), 12,
     "<gpu> id=0 repeats gpu 0 (line 2)"),
    (dict(l12='id="1"=>id="2"'), 12, "<gpu> id=2 is out of range for ngpus=2"),
    (dict(l2='s_chunks="1"=>s_chunks="-4"'), 2, "<gpu> s_chunks=-4 is negative"),
    (dict(l1='ngpus="2"=>ngpus="3"'), 1, "<algo> has ngpus=3 but no <gpu> for rank(s) 2"),
    (dict(l1='ngpus="2"=>ngpus="0"'), 1, "ngpus=0"),
    (dict(l1='proto="Simple"=>proto="simple"'), 1, "<algo> proto='simple' is not one of"),
    (dict(l1='coll="allreduce"=>coll="allreduce2"'), 1, "<algo> coll='allreduce2' is not"),
    (dict(l1='minBytes="0" maxBytes="0"=>minBytes="64" maxBytes="10"'), 1,
     "<algo> minBytes=64 exceeds maxBytes=10"),
    (dict(l1='<algo =><algorithm ', l18="</algorithm>"), 1, "root element is <algorithm>"),
])
def test_bad_structure(changes, line, fragment):
    fails(doc(**changes), line, fragment)


def test_gpus_and_threadblocks_out_of_order_are_sorted():
    lines = list(BASE)
    swapped = lines[:1] + lines[11:17] + lines[1:11] + lines[17:]
    tb_swapped = lines[:2] + lines[6:10] + lines[2:6] + lines[10:]
    a = read_xml("\n".join(BASE))
    assert read_xml("\n".join(swapped)) == a and read_xml("\n".join(tb_swapped)) == a


def test_inputs_that_are_not_documents():
    fails("", None, "empty input")
    fails("   \n", None, "empty input")
    fails(b"", None, "empty input")
    message = fails("no/such/file.xml", None, "cannot read XML file")
    assert message.startswith("no/such/file.xml:")
    fails(Path("/"), None, "cannot read XML file")
    fails("<?xml version='1.0'?>\n<!DOCTYPE a [<!ENTITY x 'y'>]>\n<algo/>", 2,
          "<!DOCTYPE> is not allowed")
    fails("<algo name='\ud800'/>", None, "UTF-8 cannot encode")
    with pytest.raises(XmlError, match="needs XML text or a path, got int"):
        read_xml(42)


def test_error_is_a_mscclerror_and_never_a_raw_lxml_exception():
    for text in ("<", "<a", "<algo>", "</algo>", "<algo/><", "<!-- x", "<algo\x00/>", "&amp;"):
        with pytest.raises(MscclError):
            read_xml(text if text.startswith("<") else "<" + text)


def test_entity_bomb_does_not_hang():
    bomb = ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
            + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefgh",
                                                                               "bcdefghi"))
            + ']><algo name="&i;"/>')
    t0 = time.perf_counter()
    fails(bomb, 1, "<!DOCTYPE>")
    # a guard against expanding 10^9 characters, not a speed claim
    assert time.perf_counter() - t0 < 20


@pytest.mark.parametrize("name,lines,fragment", [
    ("missing_cnt.xml", {7}, "<step> is missing attribute 'cnt'"),
    ("dep_on_missing_tb.xml", {10}, "depends on threadblock 3"),
    # libxml2 reports the end of the data, or the unfinished tag's line in older versions
    ("truncated.xml", {6, 7}, "not well-formed XML"),
])
def test_bad_files_on_disk(name, lines, fragment):
    path = DATA / name
    with pytest.raises(XmlError) as info:
        read_xml(path)
    assert info.value.line in lines and info.value.file == str(path)
    assert str(info.value).startswith(f"{path}:{info.value.line}: "), str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize("changes", [
    dict(l4='srcoff="0"=>srcoff="99"'),                    # past the input buffer
    dict(l3='send="1"=>send="-1"'),                        # a send without a send peer
    dict(l7='chan="0"=>chan="5"'),                         # channel past nchannels
    dict(l7='send="-1" recv="-1"=>send="1" recv="1"'),     # second tb on connection (0, 1)
    dict(l2='i_chunks="2"=>i_chunks="7"'),                 # chunk count not nchunksperloop
    dict(l9='deps="1"=>deps="0"'),                         # wait for a step without hasdep
])
def test_representable_but_wrong_files_are_left_to_the_verifier(changes):
    assert read_xml(doc(**changes)).ngpus == 2
