"""Golden XML: small programs compile to exactly the checked-in files.

A deliberate change of the compiler's output regenerates them with
``MSCCL_PY_REGOLD=1 python -m pytest tests/compiler/test_golden.py`` (review the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repo_paths import PROGRAMS
from msccl_py.language.runner import run_program
from msccl_py.targets.msccl import read_xml, write_xml

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "allreduce_ring_4.xml": ("allreduce_ring.py", ["4"], None),
    "allreduce_ring_3_2ch_2inst_LL.xml": ("allreduce_ring.py", ["3", "2", "2", "--protocol", "LL"],
                                          None),
    "allgather_ring_3_2ch.xml": ("allgather_ring.py", ["3", "2"], None),
    "alltoall_allpairs_3.xml": ("alltoall_allpairs.py", ["3"], None),
    "alltonext_backward_2_1.xml": ("alltonext_backward.py", ["2", "1"], "msccl"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    prog, args, target = CASES[name]
    (res,) = run_program(str(PROGRAMS / prog), args, target).results
    path = GOLDEN / name
    if os.environ.get("MSCCL_PY_REGOLD"):
        path.write_text(res.xml)
    assert res.xml == path.read_text()
    # and the writer reproduces it byte for byte from the reader's IR
    assert write_xml(read_xml(res.xml), target or "msccl-executor") == res.xml
