"""The plan verifier on MSCCL++'s own plans: every correct collective plan is ok; the broken ones are caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from msccl_py.mscclpp.read import read_plan, read_plan_text
from msccl_py.mscclpp.verify import regimes, verify_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "mscclpp"
COLLECTIVE_DIRS = ("single_node", "multi_node", "default_algos")
#: plans that are really broken, with the finding that shows it
BROKEN = {
    "signal_wait_fuse_test": ("deadlock", "rank 0 threadblock 0 op 3 (wait) waits on memory channel 2 "
                                          "from rank 1, which the plan signals 0 times for 1 waits"),
    "relaxed_signal_wait_fuse_test": ("deadlock", "rank 1 threadblock 0 op 3 (rlxwait) waits on memory "
                                                  "channel 2 from rank 0"),
    "reducescatter_pkt_2x8": ("invalid", "rank 0 threadblock 0 op 0 (ppkt) fuses 14 source buffers; "
                                         "the executor holds 10 per operation"),
    "put_fuse_test": ("race", "rank 0 threadblock 0 op 5 (put) reads rank 0 input element 0 that rank 1 "
                              "threadblock 0 op 5 (put) wrote"),
    "reduce_copy_packet_test": ("deadlock", "(recpkt) reads LL packets s[chunk 0] that no threadblock has written"),
    "reduce_copy_send_packet_test": ("deadlock", "(recspkt) reads LL packets s[chunk 0]"),
    # threadblocks 1-3 of each rank write the peer's output with no synchronisation at all
    "tbg_reduce_send_test": ("race", "rank 1 threadblock 1 op 0 (res) writes rank 0 output element 10 with "
                                     "nothing ordering it before rank 0's kernel ends"),
    # one multicast store into the peer's input, and nothing after it
    "switch_broadcast_test": ("race", "rank 0 threadblock 0 op 0 (gstore) writes rank 1 input element 0 with "
                                      "nothing ordering it before rank 1's kernel ends"),
}
READER_REJECTS = {"switch_reduce_test"}
#: the largest plans (4-5 s each here) run with ``-m slow``; their smaller siblings stay in
SLOW = {"alltoall_pipeline_8", "alltoall_ring_8", "alltoall_ring_peers_8", "alltoall_ring_oop_8"}
PLANS = [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p
         for p in sorted(DATA.glob("*/*.json")) if p.stem not in READER_REJECTS]


@pytest.mark.parametrize("path", PLANS, ids=lambda p: getattr(p, "stem", None))
def test_plan_verdict(path):
    verdict = verify_plan(read_plan(str(path)))
    if path.stem in BROKEN:
        status, line = BROKEN[path.stem]
        assert verdict.status == status, verdict.report()
        assert any(line in f for f in verdict.findings), verdict.report()
    else:
        assert verdict.status == "ok", verdict.report()
        if path.parent.name in COLLECTIVE_DIRS:
            assert "postcondition holds" in verdict.summary


def test_pipeline_plan_checked_at_two_regimes():
    plan = read_plan(str(DATA / "single_node" / "allreduce_pipeline.json"))
    sizes = regimes(plan)
    assert len(sizes) == 2 and sizes[1] > 1048576 > sizes[0]


def _plan(ops0: str, ops1: str, channels="memory") -> str:
    def gpu(r, ops):
        return (f'{{"id":{r},"input_chunks":1,"output_chunks":1,"scratch_chunks":0,'
                f'"channels":[{{"channel_type":"{channels}","connected_to":[{1 - r}]}}],'
                f'"remote_buffers":[{{"rank":{1 - r},"type":"o","access_channel_types":["{channels}"]}}],'
                f'"threadblocks":[{{"id":0,"channels":[{{"channel_type":"{channels}","channel_ids":[0]}}],'
                f'"remote_buffer_refs":[{{"access_channel_type":"{channels}","remote_buffer_ids":[0]}}],'
                f'"ops":[{ops}]}}]}}')
    return ('{"name":"x","collective":"sendrecv","protocol":"Simple","inplace":false,"gpus":['
            + gpu(0, ops0) + "," + gpu(1, ops1) + "]}")


PUT = '{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1}],"channel_type":"memory"}'
SIG = '{"name":"signal","channel_ids":[0],"channel_type":"memory"}'
WAIT = '{"name":"wait","channel_ids":[0],"channel_type":"memory"}'
RSIG = '{"name":"rlxsignal","channel_ids":[0],"channel_type":"memory"}'
RWAIT = '{"name":"rlxwait","channel_ids":[0],"channel_type":"memory"}'
NOP = '{"name":"nop"}'


def test_exchange_ok():
    text = _plan(f"{PUT},{NOP},{SIG},{WAIT}", f"{PUT},{NOP},{SIG},{WAIT}")
    assert verify_plan(read_plan_text(text)).status == "ok"


def test_missing_signal_is_deadlock_naming_the_wait():
    v = verify_plan(read_plan_text(_plan(f"{PUT},{WAIT}", f"{PUT},{SIG},{WAIT}")))
    assert v.status == "deadlock"
    assert ("deadlock: rank 1 threadblock 0 op 2 (wait) waits on memory channel 0 from rank 0, which "
            "the plan signals 0 times for 1 waits") in v.findings


READ_BACK = ('{"name":"copy","src_buff":[{"type":"o","index":0,"size":1}],'
             '"dst_buff":[{"type":"i","index":0,"size":1}]}')


def test_unsynchronised_read_of_a_put_is_a_race():
    v = verify_plan(read_plan_text(_plan(f"{PUT},{READ_BACK}", f"{PUT},{READ_BACK}")))
    assert v.status == "race"
    assert ("race: rank 1 threadblock 0 op 1 (copy) reads rank 1 output element 0 that rank 0 "
            "threadblock 0 op 0 (put) wrote with no signal/wait, barrier or semaphore ordering them"
            in v.findings)


def test_relaxed_signal_orders_execution_not_data():
    relaxed = f"{PUT},{NOP},{RSIG},{RWAIT},{NOP},{READ_BACK}"
    assert verify_plan(read_plan_text(_plan(relaxed, relaxed))).status == "race"
    full = f"{PUT},{NOP},{SIG},{WAIT},{NOP},{READ_BACK}"
    assert verify_plan(read_plan_text(_plan(full, full))).status == "ok"


def test_four_byte_alignment_verifies_with_narrow_fingerprints():
    import json
    obj = json.loads((DATA / "single_node" / "allreduce_pkt_4.json").read_text())
    obj["buffer_alignment"] = 4
    assert verify_plan(read_plan_text(json.dumps(obj))).status == "ok"
    obj["gpus"][0]["threadblocks"][0]["ops"][1]["name"] = "upkt"
    assert verify_plan(read_plan_text(json.dumps(obj))).status != "ok"
