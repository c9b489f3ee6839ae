"""The tuner's table: the target's rule, one section per distinct tiling, how to load the files."""

from __future__ import annotations

import pytest

from msccl_py.tuning.report import load_line, table
from msccl_py.tuning.tune import tune


@pytest.fixture(scope="module", params=["rccl", "msccl"])
def result(request, tmp_path_factory):
    return tune("allgather", "mi300x", tmp_path_factory.mktemp(request.param),
                programs=["allgather_ring"], sizes="1KiB,64MiB", instances=(1,), channels=(8,),
                target=request.param)


def test_the_rule_and_its_source_head_the_table(result):
    first = table(result).splitlines()[0]
    if result.target == "msccl":
        assert "minBytes <= n < maxBytes" in first and "ncclTopoGetMSCCLAlgo" in first
    else:
        assert "minBytes <= n <= maxBytes" in first and "mscclInternalSchedulerSelectAlgo" in first


def test_identical_tilings_share_a_section_and_every_file_is_listed(result):
    text = table(result)
    assert text.count(" calls:\n") == 1 and "in-place and out-of-place calls:" in text
    for f in result.files:
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f.path.name + ":"))
        assert f"minBytes={f.min_bytes} maxBytes={f.max_bytes}" in line
        assert " and ".join(f.kinds) + " calls" in line and f"multiples of {f.granule} B" in line


def test_load_line(result):
    if result.target == "msccl":
        assert load_line(result) == "MSCCL_XML_FILES=" + ":".join(str(f.path)
                                                                  for f in result.load_order)
    else:
        assert load_line(result) == f"MSCCL_ALGO_DIR={result.out_dir}"
