"""The plan IR → MSCCL++ JSON, in the fields the executor's parser reads.

Ops in the IR hold rank-level channel and remote-buffer ids; the JSON wants
threadblock-local ones, so each threadblock's tables are written first (those
the IR carries, extended by anything its ops use that they lack) and the ops
index into them. Reading the result gives back the same IR.

>>> from msccl_py.targets.mscclpp.read import read_plan_text
>>> text = ('{"name":"c","collective":"allreduce","protocol":"Simple","inplace":true,"gpus":[]}')
>>> plan_to_json(read_plan_text(text))["collective"]
'allreduce'
"""

from __future__ import annotations

import json

from msccl_py.mscclpp_ir import Gpu, Op, Plan, Ref, Threadblock

#: JSON spelling of the collectives whose IR name differs
_RAW = {"reduce_scatter": "reducescatter"}


def plan_to_json(plan: Plan) -> dict:
    """The plan as the JSON object MSCCL++'s executor loads."""
    return {
        "name": plan.name,
        "collective": plan.raw_collective or _RAW.get(plan.collective, plan.collective),
        "protocol": plan.protocol,
        "inplace": plan.inplace,
        "reuse_resources": plan.reuse_resources,
        "gpus": [_gpu(g) for g in plan.gpus],
        "num_threads_per_block": plan.num_threads_per_block,
        "use_double_scratch_buffer": plan.double_scratch,
        "buffer_alignment": plan.buffer_alignment,
        "min_message_size": plan.min_message_size,
        "max_message_size": plan.max_message_size,
    }


def write_plan(plan: Plan, path: str) -> None:
    """Write ``plan`` as JSON to ``path``."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(plan_to_json(plan), fh, indent=1)
        fh.write("\n")


def _gpu(g: Gpu) -> dict:
    channels = [{"channel_type": "memory", "connected_to": [p]} for p in g.memory_channels]
    channels += [{"channel_type": "port", "connected_to": [p]} for p in g.port_channels]
    channels += [{"channel_type": "switch", "buffer_type": s.buffer,
                  "rank_groups": [{"size": s.nchunks, "ranks": list(s.ranks)}]} for s in g.switch_channels]
    return {
        "id": g.rank,
        "input_chunks": g.input_chunks,
        "output_chunks": g.output_chunks,
        "scratch_chunks": g.scratch_chunks,
        "threadblocks": [_threadblock(tb) for tb in g.threadblocks],
        "channels": channels,
        "remote_buffers": [{"rank": b.rank, "type": b.buffer, "access_channel_types": list(b.access)}
                           for b in g.remote_buffers],
        "semaphores": [{"init_value": v} for v in g.semaphores],
    }


def _threadblock(tb: Threadblock) -> dict:
    chans = {t: list(ids) for t, ids in tb.channels.items()}
    bufs = {t: list(ids) for t, ids in tb.remote_buffers.items()}
    for top in tb.ops:
        for op in [top] + top.ops:
            if op.channel_type in ("memory", "port", "switch"):
                table = chans.setdefault(op.channel_type, [])
                table += [c for c in op.channels if c not in table]
            for ref in op.src + op.dst:
                if ref.kind == "remote":
                    table = bufs.setdefault(op.channel_type, [])
                    if ref.remote not in table:
                        table.append(ref.remote)
                elif ref.kind == "switch":
                    table = chans.setdefault("switch", [])
                    if ref.switch not in table:
                        table.append(ref.switch)
    return {
        "id": tb.id,
        "ops": [_op(op, chans, bufs) for op in tb.ops],
        "channels": [{"channel_type": t, "channel_ids": ids} for t, ids in chans.items()],
        "remote_buffer_refs": [{"access_channel_type": t, "remote_buffer_ids": ids} for t, ids in bufs.items()],
    }


def _op(op: Op, chans: dict, bufs: dict) -> dict:
    out: dict = {"name": op.name}
    if op.src:
        out["src_buff"] = [_ref(r, op, chans, bufs) for r in op.src]
    if op.dst:
        out["dst_buff"] = [_ref(r, op, chans, bufs) for r in op.dst]
    if op.channels:
        out["channel_ids"] = [chans[op.channel_type].index(c) for c in op.channels]
    if op.channel_type is not None:
        out["channel_type"] = op.channel_type
    if op.reduce_op is not None:
        out["reduce_op"] = op.reduce_op
    if op.tbg is not None:
        out["tbg_info"] = {"tb_id": op.tbg[0], "tbg_size": op.tbg[1]}
    if op.name == "barrier":
        out["barrier_id"] = op.barrier_id
        out["num_threadblocks"] = op.num_threadblocks
    if op.semaphores:
        out["semaphore_ids"] = list(op.semaphores)
    if op.name == "pipeline":
        out["iter_context"] = {"unit_size": op.unit_size, "num_chunks": op.num_chunks}
        out["ops"] = [_op(inner, chans, bufs) for inner in op.ops]
    return out


def _ref(r: Ref, op: Op, chans: dict, bufs: dict) -> dict:
    if r.kind == "remote":
        return {"buffer_id": bufs[op.channel_type].index(r.remote), "index": r.index, "size": r.size}
    if r.kind == "switch":
        return {"switch_channel_id": chans["switch"].index(r.switch), "index": r.index, "size": r.size}
    return {"type": r.buffer, "index": r.index, "size": r.size}
