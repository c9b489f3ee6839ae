"""The plan verifier on MSCCL++'s own plans: every correct collective plan is ok; the broken ones are caught."""

from __future__ import annotations

import pytest

from msccl_py.targets.mscclpp.read import read_plan, read_plan_text
from msccl_py.verify.mscclpp.plan_check import regimes, verify_plan
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclpp"
COLLECTIVE_DIRS = ("single_node", "multi_node", "default_algos", "executor_tests", "execution_files")
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
    # MSCCL++'s executor test: the copy into scratch is split over a 2-block group by 2 chunks, the get
    # that reads it by 1 chunk, so block 0 reads the half that the peer's block 1 wrote and signalled
    # to block 1 only
    "reduce_tbg": ("race", "rank 0 threadblock 0 op 7 (get) reads rank 1 scratch element 8 that rank 1 "
                           "threadblock 1 op 0 (copy) wrote"),
    # one multicast store into the peer's input, and nothing after it
    "switch_broadcast_test": ("race", "rank 0 threadblock 0 op 0 (gstore) writes rank 1 input element 0 with "
                                      "nothing ordering it before rank 1's kernel ends"),
}
READER_REJECTS = {"unit_tests/switch_reduce_test", "execution_files/allreduce_pipeline"}
#: the largest plans (4-5 s each here) run with ``-m slow``; their smaller siblings stay in
SLOW = {"alltoall_pipeline_8", "alltoall_ring_8", "alltoall_ring_peers_8", "alltoall_ring_oop_8"}
PLANS = [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p
         for p in sorted(DATA.glob("*/*.json")) if f"{p.parent.name}/{p.stem}" not in READER_REJECTS]


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


# -- what the executor runs per thread (msccl_py.plan.mscclpp.threads) ------------------------------------

def test_signal_right_after_a_put_is_a_race_naming_both():
    # the put runs on every thread, the signal on thread 0 only: without a nop it can go first
    v = verify_plan(read_plan_text(_plan(f"{PUT},{SIG},{WAIT}", f"{PUT},{NOP},{SIG},{WAIT}")))
    assert v.status == "race"
    assert any("rank 0 threadblock 0 op 0 (put)" in f and "rank 0 threadblock 0 op 1 (signal)" in f
               and "no nop or barrier after op 0 (put), which every thread runs" in f
               for f in v.findings), v.report()


def test_read_right_after_a_wait_is_a_race_naming_both():
    # only thread 0 waits; the other threads copy at once unless a nop holds them
    fast = f"{PUT},{NOP},{SIG},{WAIT},{READ_BACK}"
    v = verify_plan(read_plan_text(_plan(fast, f"{PUT},{NOP},{SIG},{WAIT},{NOP},{READ_BACK}")))
    assert v.status == "race"
    assert any("rank 0 threadblock 0 op 4 (copy) reads rank 0 output element 0" in f
               and "rank 0 threadblock 0 op 3 (wait) orders them" in f
               and "no nop or barrier passes that on before op 4" in f for f in v.findings), v.report()


def _local_plan(ops: str, chunks: int = 2) -> str:
    return ('{"name":"l","collective":"test","protocol":"Simple","inplace":false,"gpus":[{"id":0,'
            f'"input_chunks":{chunks},"output_chunks":{chunks},"scratch_chunks":{chunks},"channels":[],'
            f'"remote_buffers":[],"threadblocks":[{{"id":0,"ops":[{ops}]}}]}}]}}')


def _copy(src: str, si: int, dst: str, di: int, size: int = 1) -> str:
    return (f'{{"name":"copy","src_buff":[{{"type":"{src}","index":{si},"size":{size}}}],'
            f'"dst_buff":[{{"type":"{dst}","index":{di},"size":{size}}}]}}')


def test_two_copies_of_one_block_race_only_where_their_threads_differ():
    # i -> s[0..1], then s[1] -> o: element k of s[1] was written by another thread than reads it
    shifted = _local_plan(f'{_copy("i", 0, "s", 0, 2)},{_copy("s", 1, "o", 0)}')
    v = verify_plan(read_plan_text(shifted))
    assert v.status == "race"
    assert ("race: rank 0 threadblock 0 op 1 (copy) reads rank 0 scratch element" in v.findings[0]
            and "that rank 0 threadblock 0 op 0 (copy) wrote with no nop or barrier between them" in v.findings[0])
    # the same range copied on: each thread reads back its own slices
    aligned = _local_plan(f'{_copy("i", 0, "s", 0, 2)},{_copy("s", 0, "o", 0, 2)}')
    assert verify_plan(read_plan_text(aligned)).status == "ok"
    barrier = _local_plan(f'{_copy("i", 0, "s", 0, 2)},{NOP},{_copy("s", 1, "o", 0)}')
    assert verify_plan(read_plan_text(barrier)).status == "ok"


def test_write_into_a_peer_the_peer_never_waits_for_races_with_its_kernel_end():
    v = verify_plan(read_plan_text(_plan(f"{PUT}", f"{PUT},{NOP},{SIG}")))
    assert v.status == "race"
    assert any("rank 0 threadblock 0 op 0 (put) writes rank 1 output element 0 with nothing ordering it "
               "before rank 1's kernel ends" in f for f in v.findings), v.report()


def test_semaphore_released_more_than_acquired_drifts_up_each_launch():
    release = '{"name":"sem_release","semaphore_ids":[0]}'
    acquire = '{"name":"sem_acquire","semaphore_ids":[0]}'
    ops0 = f'{_copy("i", 0, "s", 0)},{NOP},{release},{release}'
    ops1 = f'{acquire},{NOP},{_copy("s", 0, "o", 0)}'
    text = ('{"name":"d","collective":"test","protocol":"Simple","inplace":false,"gpus":[{"id":0,'
            '"input_chunks":1,"output_chunks":1,"scratch_chunks":1,"channels":[],"remote_buffers":[],'
            '"semaphores":[{"init_value":0}],"threadblocks":['
            f'{{"id":0,"ops":[{ops0}]}},{{"id":1,"ops":[{ops1}]}}]}}]}}')
    v = verify_plan(read_plan_text(text))
    assert v.status == "race"
    assert ("race: rank 0 semaphore 0 (initial value 0) is released 2 and acquired 1 times per launch, so "
            "its count drifts up by 1 per launch: in the next launch an acquire passes before the release "
            "it pairs with") in v.findings
    # launch 2 starts the semaphore at 1: its acquire passes before block 0 has written scratch
    assert any(f.endswith("[launch 2]") and "passes on semaphore 0's initial value 1" in f
               for f in v.findings), v.report()


def test_wrong_value_names_the_operation_that_last_wrote_it():
    import json
    obj = json.loads((DATA / "single_node" / "allgather_pkt_4.json").read_text())
    # rank 1 block 3 unpacks rank 2's block into chunk 1 (its own) instead of chunk 2
    obj["gpus"][1]["threadblocks"][3]["ops"][0]["dst_buff"][0]["index"] = 1
    v = verify_plan(read_plan_text(json.dumps(obj)))
    assert v.status == "incorrect"
    assert any(f.startswith("incorrect: rank 1 output element ") and
               "; last written by rank 1 threadblock 3 op 0 (upkt)" in f for f in v.findings), v.report()


def test_wrong_sum_names_the_missing_ranks():
    import json
    obj = json.loads((DATA / "single_node" / "allreduce_4.json").read_text())
    obj["gpus"][0]["threadblocks"][0]["ops"][5]["name"] = "copy"        # rres: reads its peers no more
    for side in ("src_buff", "dst_buff"):
        obj["gpus"][0]["threadblocks"][0]["ops"][5][side] = obj["gpus"][0]["threadblocks"][0]["ops"][5][side][:1]
    v = verify_plan(read_plan_text(json.dumps(obj)))
    assert ("incorrect: rank 0 output element 0 (of 256) is wrong (8 wrong elements): holds rank 0's input "
            "element 0 alone, missing ranks 1, 2, 3; last written by rank 0 threadblock 0 op 5 (copy)"
            in v.findings), v.report()
