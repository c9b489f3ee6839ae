"""MSCCL++ JSON execution plans → :class:`msccl_py.mscclpp_ir.Plan`.

The fields and their meaning are those MSCCL++'s executor reads
(``execution_plan.cc``). Every structural fault (malformed JSON, a missing or
mistyped field, an unknown operation, a channel or buffer id that names
nothing) raises one :class:`~msccl_py.errors.PlanError` naming its JSON path,
e.g. ``gpus[1].threadblocks[0].ops[3].channel_ids[0]``. Semantic faults
(wrong data, deadlocks, races, chunk ranges past a buffer's end) are the
verifier's.

>>> plan = read_plan_text('{"name": "x", "collective": "allreduce", "protocol": "Simple",'
...                       ' "inplace": true, "gpus": []}')
>>> plan.collective, plan.nranks
('allreduce', 0)
"""

from __future__ import annotations

import json

from msccl_py.errors import PlanError
from msccl_py.mscclpp_ir import CHANNEL_TYPES, Gpu, Op, Plan, Ref, RemoteBuffer, SwitchChannel, Threadblock

#: executor operation names (``getOpType`` in execution_plan.cc)
OPERATIONS = frozenset({
    "nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "flush", "re",
    "res", "rre", "rres", "ppkt", "rppkt", "respkt", "cpkt", "upkt", "repkt", "recpkt",
    "recspkt", "glres", "gstore", "gstorepkt", "rlxsignal", "rlxwait", "pipeline",
    "sem_acquire", "sem_release",
})

COLLECTIVES = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter",
               "reduce_scatter": "reduce_scatter", "alltoall": "alltoall", "sendrecv": "sendrecv"}

_BUFFER_CODES = ("i", "o", "s")


def is_plan_text(text: str) -> bool:
    """True when ``text`` looks like JSON rather than XML (first non-blank character ``{`` or ``[``)."""
    return text.lstrip("\ufeff \t\r\n")[:1] in ("{", "[")


def is_plan_file(path: str) -> bool:
    """True when the file at ``path`` holds a JSON plan (decided by content, not name)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"[")


def read_plan(path: str) -> Plan:
    """Read the MSCCL++ plan in file ``path``."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            text = fh.read()
    except OSError as exc:
        raise PlanError(f"cannot read plan: {exc.strerror}", file=path) from None
    return read_plan_text(text, file=path)


def read_plan_text(text: str, file: str | None = None) -> Plan:
    """Parse plan JSON ``text``; ``file`` only labels messages."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                        file=file) from None
    return _Reader(file).plan(obj)


class _Reader:
    def __init__(self, file: str | None):
        self.file = file

    def fail(self, path: str, message: str):
        raise PlanError(message, path=path, file=self.file)

    def get(self, obj: dict, key: str, kind, path: str, default=...):
        if not isinstance(obj, dict):
            self.fail(path, "expected an object")
        sub = f"{path}.{key}" if path else key
        if key not in obj:
            if default is ...:
                self.fail(sub, "missing")
            return default
        value = obj[key]
        ok = isinstance(value, kind) and not (kind in (int, (int,)) and isinstance(value, bool))
        if not ok:
            name = {int: "an integer", str: "a string", bool: "true or false", list: "a list",
                    dict: "an object"}.get(kind, str(kind))
            self.fail(sub, f"expected {name}, got {json.dumps(value)[:40]}")
        if kind is int and value < 0:
            self.fail(sub, f"must be non-negative, got {value}")
        return value

    def plan(self, obj) -> Plan:
        if not isinstance(obj, dict):
            self.fail("", "a plan is a JSON object")
        raw = self.get(obj, "collective", str, "")
        protocol = self.get(obj, "protocol", str, "")
        if protocol not in ("Simple", "LL"):
            self.fail("protocol", f"unknown protocol {protocol!r} (Simple or LL)")
        gpus_json = self.get(obj, "gpus", list, "")
        plan = Plan(
            name=self.get(obj, "name", str, ""),
            collective=COLLECTIVES.get(raw.lower(), raw),
            raw_collective=raw,
            protocol=protocol,
            inplace=self.get(obj, "inplace", bool, ""),
            gpus=[],
            reuse_resources=self.get(obj, "reuse_resources", bool, "", False),
            num_threads_per_block=self.get(obj, "num_threads_per_block", int, "", 1024),
            double_scratch=self.get(obj, "use_double_scratch_buffer", bool, "", False),
            buffer_alignment=self.get(obj, "buffer_alignment", int, "", 16),
            min_message_size=self.get(obj, "min_message_size", int, "", 0),
            max_message_size=self.get(obj, "max_message_size", int, "", 2**64 - 1),
        )
        if plan.buffer_alignment == 0:
            self.fail("buffer_alignment", "must be positive")
        for r, g in enumerate(gpus_json):
            plan.gpus.append(self.gpu(g, f"gpus[{r}]", r, len(gpus_json)))
        return plan

    def gpu(self, g, path: str, rank: int, nranks: int) -> Gpu:
        gid = self.get(g, "id", int, path)
        if gid != rank:
            self.fail(f"{path}.id", f"gpu at position {rank} has id {gid}")
        gpu = Gpu(rank=rank, input_chunks=self.get(g, "input_chunks", int, path),
                  output_chunks=self.get(g, "output_chunks", int, path),
                  scratch_chunks=self.get(g, "scratch_chunks", int, path))
        mem, port, switch = [], [], []
        for c, ch in enumerate(self.get(g, "channels", list, path, [])):
            cp = f"{path}.channels[{c}]"
            ctype = self.channel_type(self.get(ch, "channel_type", str, cp), f"{cp}.channel_type")
            if ctype == "switch":
                buf = self.buffer_code(self.get(ch, "buffer_type", str, cp), f"{cp}.buffer_type")
                for k, grp in enumerate(self.get(ch, "rank_groups", list, cp)):
                    gp = f"{cp}.rank_groups[{k}]"
                    ranks = self.get(grp, "ranks", list, gp)
                    for j, peer in enumerate(ranks):
                        self.peer(peer, f"{gp}.ranks[{j}]", nranks)
                    switch.append(SwitchChannel(buf, tuple(ranks), self.get(grp, "size", int, gp)))
                continue
            if ctype == "none":
                continue
            dest = mem if ctype == "memory" else port
            for j, peer in enumerate(self.get(ch, "connected_to", list, cp)):
                dest.append(self.peer(peer, f"{cp}.connected_to[{j}]", nranks))
        gpu.memory_channels, gpu.port_channels, gpu.switch_channels = tuple(mem), tuple(port), tuple(switch)
        rbs = []
        for b, rb in enumerate(self.get(g, "remote_buffers", list, path, [])):
            bp = f"{path}.remote_buffers[{b}]"
            owner = self.peer(self.get(rb, "rank", int, bp), f"{bp}.rank", nranks)
            buf = self.buffer_code(self.get(rb, "type", str, bp), f"{bp}.type")
            access = tuple(self.channel_type(t, f"{bp}.access_channel_types[{j}]")
                           for j, t in enumerate(self.get(rb, "access_channel_types", list, bp)))
            rbs.append(RemoteBuffer(owner, buf, access))
        gpu.remote_buffers = tuple(rbs)
        sems = []
        for s, sem in enumerate(self.get(g, "semaphores", list, path, [])):
            sems.append(self.get(sem, "init_value", int, f"{path}.semaphores[{s}]"))
        gpu.semaphores = tuple(sems)
        for t, tb in enumerate(self.get(g, "threadblocks", list, path)):
            gpu.threadblocks.append(self.threadblock(tb, f"{path}.threadblocks[{t}]", t, gpu))
        return gpu

    def peer(self, value, path: str, nranks: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < nranks:
            self.fail(path, f"rank {json.dumps(value)} does not exist (the plan has {nranks} gpus)")
        return value

    def channel_type(self, value: str, path: str) -> str:
        if value not in CHANNEL_TYPES + ("none",):
            self.fail(path, f"unknown channel type {value!r} (memory, port, switch)")
        return value

    def buffer_code(self, value: str, path: str) -> str:
        if value not in _BUFFER_CODES:
            self.fail(path, f"unknown buffer type {value!r} (i, o, s)")
        return value

    def threadblock(self, tb, path: str, position: int, gpu: Gpu) -> Threadblock:
        tid = self.get(tb, "id", int, path)
        if tid != position:
            self.fail(f"{path}.id", f"threadblock at position {position} has id {tid}")
        block = Threadblock(id=tid)
        sizes = {"memory": len(gpu.memory_channels), "port": len(gpu.port_channels),
                 "switch": len(gpu.switch_channels)}
        for c, ch in enumerate(self.get(tb, "channels", list, path, [])):
            cp = f"{path}.channels[{c}]"
            ctype = self.channel_type(self.get(ch, "channel_type", str, cp), f"{cp}.channel_type")
            ids = self.get(ch, "channel_ids", list, cp)
            for j, cid in enumerate(ids):
                if not isinstance(cid, int) or isinstance(cid, bool) or not 0 <= cid < sizes.get(ctype, 0):
                    self.fail(f"{cp}.channel_ids[{j}]", f"rank {gpu.rank} has no {ctype} channel "
                              f"{json.dumps(cid)} ({sizes.get(ctype, 0)} defined)")
            block.channels[ctype] = block.channels.get(ctype, ()) + tuple(ids)
        for c, ref in enumerate(self.get(tb, "remote_buffer_refs", list, path, [])):
            cp = f"{path}.remote_buffer_refs[{c}]"
            ctype = self.channel_type(self.get(ref, "access_channel_type", str, cp),
                                      f"{cp}.access_channel_type")
            ids = self.get(ref, "remote_buffer_ids", list, cp)
            for j, bid in enumerate(ids):
                if not isinstance(bid, int) or isinstance(bid, bool) or not 0 <= bid < len(gpu.remote_buffers):
                    self.fail(f"{cp}.remote_buffer_ids[{j}]", f"rank {gpu.rank} has no remote buffer "
                              f"{json.dumps(bid)} ({len(gpu.remote_buffers)} defined)")
                if ctype not in gpu.remote_buffers[bid].access:
                    self.fail(f"{cp}.remote_buffer_ids[{j}]", f"remote buffer {bid} is not reachable "
                              f"through a {ctype} channel")
            block.remote_buffers[ctype] = block.remote_buffers.get(ctype, ()) + tuple(ids)
        for k, op in enumerate(self.get(tb, "ops", list, path)):
            block.ops.append(self.op(op, f"{path}.ops[{k}]", block, gpu, nested=False))
        return block

    def op(self, o, path: str, tb: Threadblock, gpu: Gpu, nested: bool) -> Op:
        name = self.get(o, "name", str, path)
        if name not in OPERATIONS:
            self.fail(f"{path}.name", f"unknown operation {name!r}")
        op = Op(name=name, path=path)
        if "channel_type" in o:
            ctype = self.channel_type(self.get(o, "channel_type", str, path), f"{path}.channel_type")
            op.channel_type = None if ctype == "none" else ctype
        if "channel_ids" in o:
            table = tb.channels.get(op.channel_type or "", ())
            ids = []
            for j, cid in enumerate(self.get(o, "channel_ids", list, path)):
                if not isinstance(cid, int) or isinstance(cid, bool) or not 0 <= cid < len(table):
                    self.fail(f"{path}.channel_ids[{j}]", f"threadblock {tb.id} of rank {gpu.rank} binds "
                              f"no {op.channel_type} channel {json.dumps(cid)} ({len(table)} bound)")
                ids.append(table[cid])
            op.channels = tuple(ids)
        if "tbg_info" in o:
            info = self.get(o, "tbg_info", dict, path)
            size = self.get(info, "tbg_size", int, f"{path}.tbg_info")
            idx = self.get(info, "tb_id", int, f"{path}.tbg_info")
            if size == 0 or idx >= size:
                self.fail(f"{path}.tbg_info", f"tb_id {idx} is not within a group of {size}")
            op.tbg = (idx, size)
        if "reduce_op" in o:
            op.reduce_op = self.get(o, "reduce_op", str, path)
        op.src = tuple(self.ref(b, f"{path}.src_buff[{j}]", op, tb, gpu)
                       for j, b in enumerate(self.get(o, "src_buff", list, path, [])))
        op.dst = tuple(self.ref(b, f"{path}.dst_buff[{j}]", op, tb, gpu)
                       for j, b in enumerate(self.get(o, "dst_buff", list, path, [])))
        if name == "barrier":
            op.barrier_id = self.get(o, "barrier_id", int, path)
            op.num_threadblocks = self.get(o, "num_threadblocks", int, path)
        if name in ("sem_acquire", "sem_release"):
            sems = self.get(o, "semaphore_ids", list, path)
            for j, sid in enumerate(sems):
                if not isinstance(sid, int) or isinstance(sid, bool) or not 0 <= sid < len(gpu.semaphores):
                    self.fail(f"{path}.semaphore_ids[{j}]", f"rank {gpu.rank} has no semaphore "
                              f"{json.dumps(sid)} ({len(gpu.semaphores)} defined)")
            op.semaphores = tuple(sems)
        if name == "pipeline":
            if nested:
                self.fail(path, "a pipeline inside a pipeline")
            ctx = self.get(o, "iter_context", dict, path)
            op.unit_size = self.get(ctx, "unit_size", int, f"{path}.iter_context")
            if op.unit_size == 0:
                self.fail(f"{path}.iter_context.unit_size", "must be positive")
            op.num_chunks = self.get(ctx, "num_chunks", int, f"{path}.iter_context")
            op.ops = [self.op(inner, f"{path}.ops[{k}]", tb, gpu, nested=True)
                      for k, inner in enumerate(self.get(o, "ops", list, path))]
        return op

    def ref(self, b, path: str, op: Op, tb: Threadblock, gpu: Gpu) -> Ref:
        index = self.get(b, "index", int, path)
        size = self.get(b, "size", int, path)
        if "switch_channel_id" in b:
            table = tb.channels.get("switch", ())
            sid = self.get(b, "switch_channel_id", int, path)
            if sid >= len(table):
                self.fail(f"{path}.switch_channel_id", f"threadblock {tb.id} of rank {gpu.rank} binds no "
                          f"switch channel {sid} ({len(table)} bound)")
            sc = gpu.switch_channels[table[sid]]
            return Ref("switch", sc.buffer, index, size, switch=table[sid])
        if "buffer_id" in b:
            ctype = op.channel_type
            if ctype not in ("memory", "port"):
                self.fail(path, f"a remote buffer reference needs a memory or port channel_type on "
                          f"the operation, not {ctype!r}")
            table = tb.remote_buffers.get(ctype, ())
            bid = self.get(b, "buffer_id", int, path)
            if bid >= len(table):
                self.fail(f"{path}.buffer_id", f"threadblock {tb.id} of rank {gpu.rank} refers to no "
                          f"{ctype} remote buffer {bid} ({len(table)} referenced)")
            rb = gpu.remote_buffers[table[bid]]
            return Ref("remote", rb.buffer, index, size, rank=rb.rank, remote=table[bid])
        buf = self.buffer_code(self.get(b, "type", str, path), f"{path}.type")
        return Ref("local", buf, index, size, rank=gpu.rank)
