"""Execution plan tables and the protocol geometry."""

import gc

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import SizeError
from msccl_py.plan import tables as P
from msccl_py.plan.geometry import LARGE, SMALL, call_geometry, geometry
from msccl_py.verify.samples import allpairs_allreduce, ring_allgather, ring_allreduce


def test_block_and_step_tables_follow_ir():
    alg = ring_allgather(3)
    p = P.build_plan(alg)
    assert p.nblocks == 6 and p.nsteps == alg.num_steps()
    assert p.rank_blocks.tolist() == [0, 2, 4, 6]
    for b, (gpu, tb) in enumerate(alg.threadblocks()):
        row = p.blocks[b]
        assert row[[P.B_RANK, P.B_TB, P.B_CHAN, P.B_SEND_PEER, P.B_RECV_PEER]].tolist() == [
            gpu.rank, tb.id, tb.channel, tb.send_peer, tb.recv_peer]
        rows = p.block_steps(b)
        assert len(rows) == len(tb.steps)
        for k, (st, r) in enumerate(zip(tb.steps, rows)):
            assert P.OP_NAMES[r[P.S_OP]] == st.op
            assert r[P.S_COUNT] == st.count and r[P.S_INDEX] == k and r[P.S_BLOCK] == b
            if st.src is not None:
                assert P.BUF_NAMES[r[P.S_SRC_BUF]] == st.src.buffer
                assert r[P.S_SRC_OFF] == st.src.offset
            assert r[P.S_HAS_DEP] == int(st.has_dependents)


def test_dependency_rows_point_at_target_steps():
    alg = ring_allgather(3)
    p = P.build_plan(alg)
    send_row = p.block_steps(0)[0]
    assert send_row[P.S_NDEPS] == 1
    dep = p.step_deps(int(p.blocks[0, P.B_STEP_BEGIN]))[0]
    assert dep[P.D_BLOCK] == 1 and dep[P.D_INDEX] == 0
    assert dep[P.D_STEP] == p.blocks[1, P.B_STEP_BEGIN]
    assert p.steps[dep[P.D_STEP], P.S_OP] == P.OP_COPY


def test_xml_s_index_counts_nops():
    tb = ir.Threadblock(0, steps=[ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", 0)),
                                  ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", 0),
                                          depends=[(1, 0), (2, 0)])])
    helpers = [ir.Threadblock(k, steps=[ir.Step("copy", ir.Loc("i", 0), ir.Loc("s", 0),
                                                has_dependents=True)]) for k in (1, 2)]
    alg = ir.Algorithm("x", "custom", "Simple", False, 1, 1, 1,
                       [ir.Gpu(0, 1, 1, 1, [tb] + helpers)])
    p = P.build_plan(alg)
    assert p.block_steps(0)[:, P.S_XML_S].tolist() == [0, 2]
    assert p.step_deps(1)[:, P.D_BLOCK].tolist() == [1, 2]


def test_connections_pair_sends_with_receives():
    alg = ring_allreduce(3, channels=2)
    p = P.build_plan(alg)
    assert len(p.conns) == 6
    for c in p.conns:
        sb, rb = c[P.C_SEND_BLOCK], c[P.C_RECV_BLOCK]
        assert p.blocks[sb, P.B_RANK] == c[P.C_SENDER]
        assert p.blocks[rb, P.B_RANK] == c[P.C_RECEIVER]
        assert p.blocks[sb, P.B_CHAN] == p.blocks[rb, P.B_CHAN] == c[P.C_CHAN]
        assert c[P.C_NSENDS] == c[P.C_NRECVS] == 2 * 3 - 2
    st = p.steps
    sends = np.nonzero(st[:, P.S_SEND_CONN] >= 0)[0]
    peer = st[sends, P.S_SEND_PEER_STEP]
    assert (st[peer, P.S_RECV_PEER_STEP] == sends).all()
    assert (st[peer, P.S_RECV_CONN] == st[sends, P.S_SEND_CONN]).all()
    assert (st[peer, P.S_RECV_SEQ] == st[sends, P.S_SEND_SEQ]).all()


def test_two_threadblocks_on_one_fifo_end_is_an_error():
    tbs = [ir.Threadblock(k, send_peer=1, steps=[ir.Step("send", ir.Loc("i", 0))])
           for k in range(2)]
    alg = ir.Algorithm("x", "custom", "Simple", False, 2, 1, 1,
                       [ir.Gpu(0, 1, 1, 0, tbs), ir.Gpu(1, 1, 1, 0, [])])
    with pytest.raises(P.PlanError, match="threadblocks 0 and 1 both send to rank 1"):
        P.build_plan(alg)


def test_call_chunks_and_aliases():
    ag = ring_allgather(4)
    p = P.build_plan(ag)
    assert p.call_chunks[:, :2].tolist() == [[1, 4]] * 4
    a = p.aliases(True)
    assert a[2, P.BUF_I].tolist() == [P.BUF_O, 2]
    assert a[2, P.BUF_O].tolist() == [P.BUF_O, 0]
    assert (p.aliases(False)[:, :, 1] == 0).all()
    rs = ir.Algorithm("rs", "reduce_scatter", "Simple", True, 2, 4, 1,
                      [ir.Gpu(r, 4, 2) for r in range(2)])
    a = P.build_plan(rs).aliases(True)
    assert a[1, P.BUF_O].tolist() == [P.BUF_I, 2]
    ar = P.build_plan(ring_allreduce(2)).aliases(True)
    assert ar[0, P.BUF_I].tolist() == [P.BUF_O, 0]


def test_plan_cache_per_object_and_refresh():
    alg = ring_allreduce(2)
    p1 = P.plan_for(alg)
    assert P.plan_for(alg) is p1
    alg.gpus[0].threadblocks[0].steps[0].count = 1
    assert P.plan_for(alg, refresh=True) is not p1
    key = id(alg)
    del alg, p1
    gc.collect()
    assert key not in P._CACHE


def test_geometry_matches_nccl_defaults():
    s, ll, ll128 = geometry("Simple"), geometry("LL"), geometry("LL128")
    assert (s.slot_bytes, s.iter_bytes, s.fifo_transfers) == (512 << 10, 2 << 20, 2)
    assert (ll.slot_bytes, ll.slot_data_bytes, ll.iter_bytes, ll.fifo_transfers) == (
        64 << 10, 32 << 10, 32 << 10, 8)
    assert ll128.slot_data_bytes == 614400 // 128 * 120 and ll128.fifo_transfers == 8
    assert geometry("Simple", buffsize=1 << 20).iter_bytes == 512 << 10
    with pytest.raises(SizeError, match="unknown protocol"):
        geometry("Fast")


def test_max_allowed_count_and_regimes():
    g = geometry("Simple")
    # MSCCL: max(1, iter_bytes // ceil(nbytes / nchunks)), capped at 71
    assert g.max_allowed_count(64 << 20, 8) == 1
    assert g.max_allowed_count(8 << 20, 8) == 2
    assert g.max_allowed_count(1024, 8) == 71
    assert g.regime(8 << 20, 8, max_count=2) == SMALL
    assert g.regime(8 << 20, 8, max_count=3) == LARGE
    top = g.small_max_bytes(8, 2)
    assert g.regime(top, 8, 2) == SMALL and g.regime(top + 8, 8, 2) == LARGE
    assert g.small_max_bytes(8, 72) == 0


def test_call_geometry_iterations_and_slices():
    cg = call_geometry("LL", 4, chunk_elems=20000, itemsize=4)
    assert cg.iter_elems == 8192 and cg.iterations == 3
    assert cg.slice(2) == (16384, 20000)
    assert cg.transfers(5) == 5 and cg.transfers(0) == 0
    cg = call_geometry("Simple", 4, chunk_elems=10, itemsize=4, iter_elems=4)
    assert (cg.iterations, cg.max_allowed_count, cg.slice(2)) == (3, 1, (8, 10))
    cg = call_geometry("Simple", 4, chunk_elems=10, itemsize=4)
    assert cg.iterations == 1 and cg.max_allowed_count == 71
    assert cg.transfers(72) == 2


def test_allpairs_plan_has_two_channels():
    p = P.build_plan(allpairs_allreduce(3))
    assert sorted(set(p.conns[:, P.C_CHAN].tolist())) == [0, 1]
    assert p.max_count == 3


def test_native_sources_number_ops_as_the_ir_does():
    """shm_exec.cpp (from 0) and the GPU interpreter (from 1) hold the IR's op enum; a
    source numbered otherwise is refused before it is built."""
    from msccl_py.errors import MscclError
    from msccl_py.plan.tables import OP_NAMES, check_op_enum, op_enum
    from msccl_py.runtime import shm_native
    from msccl_py.runtime.cupy import kernel_source as source
    assert OP_NAMES == tuple(ir.OP_CODES)
    check_op_enum(shm_native.SOURCE.read_text(), 0, "shm_exec.cpp")
    assert op_enum(source.OP_BASE) in source.read("interp.h")
    swapped = op_enum(0).replace("OP_COPY, OP_REDUCE", "OP_REDUCE, OP_COPY")
    with pytest.raises(MscclError, match="not the IR's numbering"):
        check_op_enum(swapped, 0, "x.cpp")
