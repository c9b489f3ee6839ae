"""The MSCCL++ executor's fixed limits (``execution_common.hpp``), checked statically.

The executor copies each threadblock into a fixed-size device struct: past
these sizes it either refuses the plan or silently writes out of bounds.

>>> from msccl_py.mscclpp_ir import Plan
>>> check_limits(Plan("p", "allreduce", "allreduce", "Simple", True, []))
[]
"""

from __future__ import annotations

from msccl_py.mscclpp_ir import Plan

MAX_CHANNEL = 16                 # channels of one type, and remote buffers, bound per threadblock
MAX_CHANNEL_PER_OPERATION = 8
MAX_BUFFERS_PER_OPERATION = 2 + MAX_CHANNEL_PER_OPERATION   # src_buff / dst_buff entries
MAX_OPERATION = 64               # per threadblock, pipeline inner operations included
MAX_DEVICE_SYNCERS = 16          # barrier ids
MAX_DEVICE_SEMAPHORES = 16       # semaphore ids per operation


def check_limits(plan: Plan) -> list[str]:
    """One ``invalid:`` line per limit a threadblock or operation exceeds."""
    out = []
    for g in plan.gpus:
        for tb in g.threadblocks:
            where = f"rank {g.rank} threadblock {tb.id}"
            for t, ids in tb.channels.items():
                if len(ids) > MAX_CHANNEL:
                    out.append(f"invalid: {where} binds {len(ids)} {t} channels; the executor holds "
                               f"{MAX_CHANNEL}")
            for t, ids in tb.remote_buffers.items():
                if len(ids) > MAX_CHANNEL:
                    out.append(f"invalid: {where} refers to {len(ids)} {t} remote buffers; the "
                               f"executor holds {MAX_CHANNEL}")
            count = sum(1 + len(op.ops) for op in tb.ops)
            if count > MAX_OPERATION:
                out.append(f"invalid: {where} has {count} operations; the executor holds {MAX_OPERATION}")
            for k, top in enumerate(tb.ops):
                for op in [top] + top.ops:
                    at = f"{where} op {k} ({op.name})"
                    if len(op.channels) > MAX_CHANNEL_PER_OPERATION:
                        out.append(f"invalid: {at} uses {len(op.channels)} channels; the executor "
                                   f"holds {MAX_CHANNEL_PER_OPERATION} per operation")
                    for side, refs in (("source", op.src), ("destination", op.dst)):
                        if len(refs) > MAX_BUFFERS_PER_OPERATION:
                            out.append(f"invalid: {at} fuses {len(refs)} {side} buffers; the executor "
                                       f"holds {MAX_BUFFERS_PER_OPERATION} per operation")
                    if op.barrier_id is not None and op.barrier_id >= MAX_DEVICE_SYNCERS:
                        out.append(f"invalid: {at} uses barrier {op.barrier_id}; the executor has "
                                   f"{MAX_DEVICE_SYNCERS}")
                    if len(op.semaphores) > MAX_DEVICE_SEMAPHORES:
                        out.append(f"invalid: {at} names {len(op.semaphores)} semaphores; the executor "
                                   f"holds {MAX_DEVICE_SEMAPHORES} per operation")
    return out
