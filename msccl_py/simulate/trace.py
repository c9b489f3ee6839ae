"""Chrome trace-event JSON of one simulated call (Perfetto and chrome://tracing open it).

One process per rank with one track (thread) per threadblock, whose slices
are its steps per simulated iteration; one "links" process with a track per
resource (link direction, switch port, NIC), whose slices are the sends that
cross it. Times are µs, the trace-event unit. Iterations past the simulated
ones were extrapolated and are not drawn; the trace's metadata says how many.

>>> from msccl_py import library
>>> from msccl_py.simulate import machine_model, simulate
>>> alg = library.compile("allgather_ring", 4, use_cache=False)
>>> m = machine_model("dgx-h100")
>>> timings = []
>>> _ = simulate(alg, m, "1MiB", timings=timings)
>>> doc = chrome_trace(alg, m, timings[0])
>>> sorted({e["ph"] for e in doc["traceEvents"]})
['M', 'X']
"""

from __future__ import annotations

import json

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclError
from msccl_py.plan.tables import (B_RANK, B_TB, IS_SEND, OP_NAMES, S_BLOCK, S_COUNT, S_INDEX,
                                  S_OP, S_SEND_CONN, plan_for)
from msccl_py.simulate.engine import Timing, wiring
from msccl_py.simulate.machine import Machine


def chrome_trace(alg: ir.Algorithm, machine: Machine, timing: Timing,
                 protocol: str | None = None) -> dict:
    """The trace-event document (a dict with ``traceEvents``) of ``timing``."""
    plan = plan_for(alg)
    w = wiring(plan, machine, protocol or alg.protocol)
    events: list[dict] = []
    links_pid = plan.ngpus
    for r in range(plan.ngpus):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                       "args": {"name": f"rank {r}"}})
    for b in range(plan.nblocks):
        events.append({"ph": "M", "name": "thread_name", "pid": int(plan.blocks[b, B_RANK]),
                       "tid": int(plan.blocks[b, B_TB]),
                       "args": {"name": f"tb {plan.blocks[b, B_TB]}"}})
    events.append({"ph": "M", "name": "process_name", "pid": links_pid, "tid": 0,
                   "args": {"name": "links"}})
    for k, res in enumerate(machine.resources):
        events.append({"ph": "M", "name": "thread_name", "pid": links_pid, "tid": k,
                       "args": {"name": f"{res.name} ({res.bw_GBps:g} GB/s)"}})
    steps = plan.steps
    ops = steps[:, S_OP]
    sends = np.nonzero(IS_SEND[ops] & (steps[:, S_SEND_CONN] >= 0))[0]
    for it, (start, end) in enumerate(zip(timing.starts, timing.ends)):
        for row in range(plan.nsteps):
            b = int(steps[row, S_BLOCK])
            events.append({"ph": "X", "pid": int(plan.blocks[b, B_RANK]),
                           "tid": int(plan.blocks[b, B_TB]),
                           "name": OP_NAMES[ops[row]], "ts": float(start[row]),
                           "dur": float(end[row] - start[row]),
                           "args": {"iteration": it, "step": int(steps[row, S_INDEX]),
                                    "count": int(steps[row, S_COUNT])}})
        for row in sends:
            c = int(steps[row, S_SEND_CONN])
            for k in w.conn_res[c]:
                events.append({"ph": "X", "pid": links_pid, "tid": k, "name": "send",
                               "ts": float(start[row]), "dur": float(end[row] - start[row]),
                               "args": {"iteration": it,
                                        "step": plan.describe_step(int(row))}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "metadata": {"algorithm": alg.name, "machine": machine.name,
                         "iterations": timing.iterations,
                         "iterations_drawn": len(timing.starts)}}


def write_trace(path: str, alg: ir.Algorithm, machine: Machine, timing: Timing,
                protocol: str | None = None) -> None:
    """Write :func:`chrome_trace` to ``path``."""
    doc = chrome_trace(alg, machine, timing, protocol)
    try:
        with open(path, "w") as f:
            json.dump(doc, f)
    except OSError as exc:
        raise MscclError(f"cannot write trace {path}: {exc.strerror}") from None
