"""The reader's fast scan agrees with its tree reader: the same IR, or it steps aside.

``read_xml`` first scans a document in the writer's layout with one regular
expression; anything the scan does not explain goes to the lxml tree reader.
These tests hold the two against each other on whole documents and on
mutants of them (one character changed, dropped or doubled, one line doubled):
where the scan accepts a document, the tree reader must accept it too and read
the same algorithm; and ``read_xml`` must answer every mutant as the tree
reader alone does, the same IR or the same error.
"""

from __future__ import annotations

import random

import pytest

from msccl_py import ir
from msccl_py.errors import XmlError
from msccl_py.targets.msccl import read as reader
from msccl_py.targets.msccl import read_xml, write_xml

L = ir.Loc


def _ring(n: int) -> ir.Algorithm:
    """An n-rank ring allgather, every step carrying a dependency on the one before."""
    gpus = []
    for r in range(n):
        steps = [ir.Step("send", L("i", 0), L("o", r), 1, has_dependents=True)]
        for k in range(1, n):
            src = (r - k) % n
            op = "recv" if k == n - 1 else "recv_copy_send"
            steps.append(ir.Step(op, None, L("o", src), 1, depends=[(0, k - 1)],
                                 has_dependents=k < n - 1))
        gpus.append(ir.Gpu(r, 1, n, 0, [ir.Threadblock(0, (r + 1) % n, (r - 1) % n, 0, steps)]))
    return ir.Algorithm("ring", "allgather", "Simple", False, n, n, 1, gpus)


def _nops() -> ir.Algorithm:
    """Steps with several dependencies (written with nops), unknown locations, scratch."""
    g0 = ir.Gpu(0, 2, 2, 3, [
        ir.Threadblock(0, send_peer=1, recv_peer=1, channel=0, steps=[
            ir.Step("send", L("i", 0), L("s", 0), 2, has_dependents=True),
            ir.Step("recv", None, L("s", 1), 1, has_dependents=True),
            ir.Step("recv_reduce_copy", L("s", 2), L("o", 1), 1, depends=[(1, 0)]),
        ]),
        ir.Threadblock(1, channel=1, steps=[
            ir.Step("copy", L("i", 0), L("s", 2), 1, has_dependents=True),
            ir.Step("reduce", L("s", 0), L("o", 0), 1, depends=[(0, 0), (0, 1)]),
        ]),
    ])
    g1 = ir.Gpu(1, 2, 2, 3, [
        ir.Threadblock(0, send_peer=0, recv_peer=0, channel=0, steps=[
            ir.Step("recv", None, None, 2),
            ir.Step("send", L("i", 1), L("s", 1), 1),
            ir.Step("send", L("o", 1), None, 1),
        ]),
        ir.Threadblock(1, channel=1),
    ])
    return ir.Algorithm("nops & <escapes>", "custom", "LL", True, 2, 2, 2, [g0, g1],
                        outofplace=False, min_bytes=64, max_bytes=1 << 20)


DOCS = {"ring": write_xml(_ring(5), "msccl"), "nops": write_xml(_nops(), "msccl")}


def _tree(data: bytes):
    """What the tree reader alone makes of ``data``: the IR, or the error's text."""
    orig = reader._scan
    reader._scan = lambda data, file: None
    try:
        return read_xml(data)
    except XmlError as exc:
        return f"XmlError: {exc}"
    finally:
        reader._scan = orig


def _answer(data: bytes):
    try:
        return read_xml(data)
    except XmlError as exc:
        return f"XmlError: {exc}"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_scan_reads_the_writers_layout_as_the_tree_reader_does(name):
    data = DOCS[name].encode()
    fast = reader._scan(data, None)
    assert fast is not None, "the writer's own layout should take the fast path"
    assert fast == _tree(data)


def _mutants(text: str, count: int, seed: int):
    rng = random.Random(seed)
    alphabet = '"<>/=-0159 \n\t&\'!?xsio'
    lines = text.splitlines(keepends=True)
    for _ in range(count):
        how = rng.randrange(4)
        if how == 3:
            k = rng.randrange(len(lines))
            yield "".join(lines[:k + 1] + lines[k:])
            continue
        k = rng.randrange(len(text))
        if how == 0:
            yield text[:k] + rng.choice(alphabet) + text[k + 1:]
        elif how == 1:
            yield text[:k] + text[k + 1:]
        else:
            yield text[:k] + text[k] + text[k:]


@pytest.mark.parametrize("name", sorted(DOCS))
def test_mutants_are_answered_as_the_tree_reader_answers_them(name):
    accepted = 0
    for mutant in _mutants(DOCS[name], 150, seed=len(name)):
        data = mutant.encode()
        tree = _tree(data)
        assert _answer(data) == tree, mutant
        fast = reader._scan(data, None)
        if fast is not None:
            accepted += 1
            assert fast == tree, mutant
    assert accepted > 0  # some mutants (an offset, a count) stay in the layout


def test_other_layouts_go_to_the_tree_reader():
    text = DOCS["ring"]
    for other in (text.replace('"', "'"), '<?xml version="1.0"?>\n' + text,
                  text.replace("<tb ", "<!-- c -->\n<tb ", 1), text.replace(" s=", "  s=")):
        data = other.encode()
        assert reader._scan(data, None) is None
        assert read_xml(data) == read_xml(text)
