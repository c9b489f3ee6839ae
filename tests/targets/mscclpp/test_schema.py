"""The executor-parser schema: MSCCL++'s own plans and our writer's output use only fields it reads."""

from __future__ import annotations

import json

import pytest

from msccl_py.targets.mscclpp.read import read_plan
from msccl_py.targets.mscclpp.schema import check_schema
from msccl_py.targets.mscclpp.write import plan_to_json
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclpp"
#: plans the executor's parser rejects (see test_read)
REJECTED = {"unit_tests/switch_reduce_test", "execution_files/allreduce_pipeline"}
SMALL = sorted(p for p in DATA.glob("*/*.json")
               if p.stat().st_size < 100_000 and f"{p.parent.name}/{p.stem}" not in REJECTED)


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_dsl_plans_fit_the_schema(path):
    assert check_schema(json.loads(path.read_text()), allow_ignored=True) == []


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_written_plans_fit_the_schema(path):
    obj = plan_to_json(read_plan(str(path)))
    assert check_schema(obj, allow_ignored=True) == []
    assert [line for line in check_schema(obj) if not line.endswith("reduce_op: not a field the executor reads")] == []


def test_schema_flags_missing_and_unknown_fields():
    obj = json.loads((DATA / "unit_tests" / "put_test.json").read_text())
    del obj["gpus"][0]["threadblocks"][0]["ops"][0]["name"]
    obj["gpus"][1]["threadblocks"][0]["ops"][0]["dst_buf"] = []
    assert check_schema(obj) == [
        "gpus[0].threadblocks[0].ops[0].name: required by the executor, missing",
        "gpus[1].threadblocks[0].ops[0].dst_buf: not a field the executor reads",
    ]
