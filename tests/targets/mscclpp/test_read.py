"""The plan reader: every generated MSCCL++ plan parses; each structural fault is one PlanError with its JSON path."""

from __future__ import annotations

import copy
import json

import pytest

from msccl_py.errors import PlanError
from msccl_py.targets.mscclpp.read import is_plan_file, read_plan, read_plan_text
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclpp"
PLANS = sorted(DATA.glob("*/*.json"))
#: plans the executor's parser itself rejects: an operation it does not know; a switch channel
#: written with the older ``buff`` field (test/execution-files, older than the parser at that commit)
EXECUTOR_REJECTS = {"unit_tests/switch_reduce_test.json": "unknown operation 'glre'",
                    "execution_files/allreduce_pipeline.json": r"channels\[0\]\.buffer_type: missing"}


def test_plans_present():
    assert len(PLANS) >= 80


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_generated_plan_reads(path):
    rel = f"{path.parent.name}/{path.name}"
    if rel in EXECUTOR_REJECTS:
        with pytest.raises(PlanError, match=EXECUTOR_REJECTS[rel]):
            read_plan(str(path))
        return
    plan = read_plan(str(path))
    raw = json.loads(path.read_text())
    assert plan.nranks == len(raw["gpus"])
    assert sum(len(tb.ops) for g in plan.gpus for tb in g.threadblocks) == sum(
        len(tb["ops"]) for g in raw["gpus"] for tb in g["threadblocks"])
    assert is_plan_file(str(path))


def test_refs_resolve_to_ranks_and_channels():
    plan = read_plan(str(DATA / "unit_tests" / "put_with_signal_and_flush_test.json"))
    op = plan.gpus[0].threadblocks[0].ops[5]
    assert op.name == "pwsf" and op.channel_type == "port" and op.channels == (0,)
    assert op.dst[0].kind == "remote" and op.dst[0].rank == 1 and op.dst[0].buffer == "i"
    assert op.src[0].kind == "local" and op.src[0].rank == 0
    assert plan.gpus[0].port_channels == (1,)


def _base():
    return json.loads((DATA / "unit_tests" / "put_with_signal_and_flush_test.json").read_text())


def _mutate(fn):
    obj = copy.deepcopy(_base())
    fn(obj)
    return json.dumps(obj)


TB = "gpus[0].threadblocks[0]"
BAD = [
    ("truncated", lambda: json.dumps(_base())[:200], "malformed JSON at line 1"),
    ("not an object", lambda: "[1, 2]", "a plan is a JSON object"),
    ("missing gpus", lambda: _mutate(lambda o: o.pop("gpus")), "gpus: missing"),
    ("unknown op", lambda: _mutate(lambda o: o["gpus"][0]["threadblocks"][0]["ops"][1].update(name="sigal")),
     f"{TB}.ops[1].name: unknown operation 'sigal'"),
    ("op channel not bound", lambda: _mutate(
        lambda o: o["gpus"][0]["threadblocks"][0]["ops"][1].update(channel_ids=[3])),
     f"{TB}.ops[1].channel_ids[0]: threadblock 0 of rank 0 binds no port channel 3"),
    ("tb channel missing", lambda: _mutate(
        lambda o: o["gpus"][0]["threadblocks"][0]["channels"][0].update(channel_ids=[2])),
     f"{TB}.channels[0].channel_ids[0]: rank 0 has no port channel 2"),
    ("remote buffer missing", lambda: _mutate(
        lambda o: o["gpus"][0]["threadblocks"][0]["ops"][5]["dst_buff"][0].update(buffer_id=4)),
     f"{TB}.ops[5].dst_buff[0].buffer_id: threadblock 0 of rank 0 refers to no port remote buffer 4"),
    ("remote buffer table", lambda: _mutate(
        lambda o: o["gpus"][0]["threadblocks"][0]["remote_buffer_refs"][0].update(remote_buffer_ids=[7])),
     f"{TB}.remote_buffer_refs[0].remote_buffer_ids[0]: rank 0 has no remote buffer 7"),
    ("peer out of range", lambda: _mutate(lambda o: o["gpus"][0]["channels"][0].update(connected_to=[5])),
     "gpus[0].channels[0].connected_to[0]: rank 5 does not exist"),
    ("buffer type", lambda: _mutate(
        lambda o: o["gpus"][0]["threadblocks"][0]["ops"][5]["src_buff"][0].update(type="x")),
     f"{TB}.ops[5].src_buff[0].type: unknown buffer type 'x'"),
    ("index type", lambda: _mutate(
        lambda o: o["gpus"][0]["threadblocks"][0]["ops"][5]["src_buff"][0].update(index="0")),
     f"{TB}.ops[5].src_buff[0].index: expected an integer"),
    ("gpu id", lambda: _mutate(lambda o: o["gpus"][1].update(id=0)), "gpus[1].id: gpu at position 1 has id 0"),
    ("protocol", lambda: _mutate(lambda o: o.update(protocol="LL128")), "protocol: unknown protocol 'LL128'"),
]


@pytest.mark.parametrize("name,make,message", BAD, ids=[b[0] for b in BAD])
def test_bad_plan_one_line_with_path(name, make, message):
    with pytest.raises(PlanError) as info:
        read_plan_text(make(), file="p.json")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("p.json") and message in text


ROUND_TRIP = [pytest.param(p, marks=pytest.mark.slow) if p.stat().st_size > 100_000 else p
              for p in PLANS if f"{p.parent.name}/{p.name}" not in EXECUTOR_REJECTS]


@pytest.mark.parametrize("path", ROUND_TRIP, ids=lambda p: getattr(p, "stem", None))
def test_write_then_read_gives_the_same_plan(path, tmp_path):
    from msccl_py.targets.mscclpp.write import write_plan
    plan = read_plan(str(path))
    out = tmp_path / "plan.json"
    write_plan(plan, str(out))
    assert read_plan(str(out)) == plan


def test_format_detected_by_content(tmp_path):
    bom = tmp_path / "plan.txt"
    bom.write_bytes(b"\xef\xbb\xbf " + json.dumps(_base()).encode())
    assert is_plan_file(str(bom)) and read_plan(str(bom)).nranks == 2
    xml = tmp_path / "algo.json"
    xml.write_text('<algo name="x">\n</algo>\n')
    assert not is_plan_file(str(xml))
