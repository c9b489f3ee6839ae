"""Seeded faults for MSCCL++ plans: one small change each, to check that verification catches it.

Each mutation works on the plan's JSON object and returns a description, or
None when the plan offers no place for it. Used by the mutation tests and
``benchmarks/``; not by the verifier.

>>> obj = {"gpus": [{"threadblocks": [{"ops": [{"name": "re", "src_buff": [
...     {"type": "i", "index": 0, "size": 1}, {"type": "s", "index": 0, "size": 1}],
...     "dst_buff": [{"type": "o", "index": 0, "size": 1}]}]}]}]}
>>> reduce_to_copy(obj, 0)
'gpus[0].threadblocks[0].ops[0]: re -> copy'
"""

from __future__ import annotations

from msccl_py.mscclpp_ir import Op
from msccl_py.plan.mscclpp.threads import ALL, kind

SYNC = ("signal", "wait", "rlxsignal", "rlxwait")
#: operations that tell another block or rank that this block's earlier writes are done
SIGNALS = ("signal", "sem_release", "pws", "pwsf")
REDUCES = ("re", "res", "rre", "rres")


def _ops(obj):
    for r, g in enumerate(obj["gpus"]):
        for t, tb in enumerate(g["threadblocks"]):
            for k, op in enumerate(tb["ops"]):
                yield f"gpus[{r}].threadblocks[{t}].ops[{k}]", tb["ops"], k, op
                for j, inner in enumerate(op.get("ops", [])):
                    yield f"gpus[{r}].threadblocks[{t}].ops[{k}].ops[{j}]", op["ops"], j, inner


def _pick(items, n):
    return items[n % len(items)] if items else None


def remove_sync(obj, n: int, names=SYNC):
    """Delete the n-th signal or wait (modulo their number)."""
    hit = _pick([(p, ops, k, op) for p, ops, k, op in _ops(obj) if op["name"] in names], n)
    if hit is None:
        return None
    path, ops, k, op = hit
    del ops[k]
    return f"{path}: {op['name']} removed"


def _buffer_refs(obj) -> list:
    """(path, side, position, reference) of every buffer reference of every operation."""
    return [(p, side, j, b) for p, _, _, op in _ops(obj) for side in ("src_buff", "dst_buff")
            for j, b in enumerate(op.get(side, []))]


def shift_offset(obj, n: int):
    """Move the n-th buffer reference of a data operation one chunk up (or down at the end)."""
    hit = _pick(_buffer_refs(obj), n)
    if hit is None:
        return None
    path, side, j, b = hit
    b["index"] += -1 if b["index"] > 0 and n % 2 else 1
    return f"{path}.{side}[{j}].index -> {b['index']}"


def reduce_to_copy(obj, n: int):
    """Turn the n-th reduction into a copy of its first source."""
    hit = _pick([(p, op) for p, _, _, op in _ops(obj) if op["name"] in REDUCES], n)
    if hit is None:
        return None
    path, op = hit
    name = op["name"]
    op["name"] = "copy"
    op["src_buff"] = op["src_buff"][:1]
    op["dst_buff"] = op["dst_buff"][:1]
    op.pop("channel_type", None)
    op.pop("reduce_op", None)
    return f"{path}: {name} -> copy"


def swap_buffers(obj, n: int):
    """Swap the first source and destination buffer references of the n-th local copy/reduce/put."""
    hit = _pick([(p, op) for p, _, _, op in _ops(obj) if op.get("src_buff") and op.get("dst_buff")
                 and op["src_buff"][0] != op["dst_buff"][0]
                 and ("type" in op["src_buff"][0]) == ("type" in op["dst_buff"][0])], n)
    if hit is None:
        return None
    path, op = hit
    op["src_buff"][0], op["dst_buff"][0] = op["dst_buff"][0], op["src_buff"][0]
    return f"{path}: src_buff[0] <-> dst_buff[0]"


def change_count(obj, n: int):
    """Shrink (or grow, when one chunk) the n-th buffer reference's size."""
    hit = _pick(_buffer_refs(obj), n)
    if hit is None:
        return None
    path, side, j, b = hit
    b["size"] += -1 if b["size"] > 1 else 1
    return f"{path}.{side}[{j}].size -> {b['size']}"


def _threads(op: dict) -> str:
    return kind(Op(op["name"], op.get("channel_type")))


def _writes(op: dict) -> bool:
    return _threads(op) == ALL and bool(op.get("dst_buff"))


def barrier_places(obj) -> list:
    """(path, ops, index) of every ``nop`` between an operation all of a block's threads run that
    writes memory and a signal (or semaphore release, or port put with signal) right after it."""
    out = []
    for path, ops, k, op in _ops(obj):
        if op["name"] != "nop" or k + 1 >= len(ops) or ops[k + 1]["name"] not in SIGNALS:
            continue
        before = [o for o in ops[:k] if o["name"] != "nop"]
        if before and _writes(before[-1]):
            out.append((path, ops, k))
    return out


def drop_barrier(obj, n: int):
    """Delete the n-th ``nop`` between a multi-thread write and a signal: the signal (on the
    block's first threads) then no longer waits for the other threads' slices of the write."""
    hit = _pick(barrier_places(obj), n)
    if hit is None:
        return None
    path, ops, k = hit
    del ops[k]
    return f"{path}: nop before {ops[k]['name']} removed (after {ops[k - 1]['name']})"


def semaphore_places(obj) -> list:
    """(rank, semaphore) of every semaphore that one threadblock acquires and another releases."""
    out = []
    for r, g in enumerate(obj["gpus"]):
        users = {}
        for t, tb in enumerate(g["threadblocks"]):
            for _, _, _, op in _ops({"gpus": [{"threadblocks": [tb]}]}):
                for s in op.get("semaphore_ids", ()):
                    users.setdefault(s, {}).setdefault(op["name"], set()).add(t)
        for s in sorted(users):
            acq, rel = users[s].get("sem_acquire", set()), users[s].get("sem_release", set())
            if acq and rel and (rel - acq or acq - rel):
                out.append((r, s))
    return out


def early_semaphore(obj, n: int):
    """Raise the n-th cross-threadblock semaphore's initial value by one, so its first acquire
    passes before the release it pairs with."""
    hit = _pick(semaphore_places(obj), n)
    if hit is None:
        return None
    r, s = hit
    sem = obj["gpus"][r]["semaphores"][s]
    sem["init_value"] += 1
    return f"gpus[{r}].semaphores[{s}].init_value -> {sem['init_value']}"


MUTATIONS = {"remove_sync": remove_sync, "shift_offset": shift_offset,
             "reduce_to_copy": reduce_to_copy, "swap_buffers": swap_buffers,
             "change_count": change_count, "drop_barrier": drop_barrier,
             "early_semaphore": early_semaphore}
