"""The JSON fields MSCCL++'s executor parser reads, level by level, and a checker against them.

Written from ``ExecutionPlan::Impl`` (``execution_plan.cc``): ``required``
fields are read with ``obj[...]`` (the parser throws without them),
``optional`` ones with ``value(...)``/``contains(...)``. ``ignored`` fields
are written by MSCCL++'s own DSL but never read; anything else is unknown to
the executor. A plan writer should produce only required and optional fields.

>>> check_schema({"name": "p", "collective": "allreduce", "protocol": "LL", "inplace": True, "gpus": []})
[]
>>> check_schema({"name": "p", "collective": "allreduce", "protocol": "LL", "gpus": [], "extra": 1})
['inplace: required by the executor, missing', 'extra: not a field the executor reads']
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Level:
    required: frozenset
    optional: frozenset = frozenset()
    ignored: frozenset = frozenset()


def _l(required, optional=(), ignored=()) -> Level:
    return Level(frozenset(required), frozenset(optional), frozenset(ignored))


SCHEMA = {
    "plan": _l({"name", "collective", "protocol", "inplace", "gpus"},
               {"reuse_resources", "use_double_scratch_buffer", "buffer_alignment", "min_message_size",
                "max_message_size", "num_threads_per_block"}),
    "gpu": _l({"id", "input_chunks", "output_chunks", "scratch_chunks", "threadblocks", "channels",
               "remote_buffers"}, {"semaphores"}),
    "gpu_channel": _l({"channel_type"}, {"connected_to", "buffer_type", "rank_groups"}),
    "rank_group": _l({"size", "ranks"}),
    "remote_buffer": _l({"rank", "type", "access_channel_types"}),
    "semaphore": _l({"init_value"}),
    "threadblock": _l({"id", "ops", "channels"}, {"remote_buffer_refs"}),
    "tb_channel": _l({"channel_type", "channel_ids"}, {"buff"}),
    "remote_buffer_ref": _l({"access_channel_type", "remote_buffer_ids"}),
    "op": _l({"name"}, {"channel_type", "channel_ids", "tbg_info", "src_buff", "dst_buff", "barrier_id",
                        "num_threadblocks", "semaphore_ids", "iter_context", "ops"}, {"reduce_op"}),
    "tbg_info": _l({"tb_id", "tbg_size"}),
    "iter_context": _l({"unit_size", "num_chunks"}),
    "buff": _l({"index", "size"}, {"type", "buffer_id", "switch_channel_id"}, {"rank"}),
}

_CHILDREN = {
    "plan": {"gpus": "gpu"},
    "gpu": {"threadblocks": "threadblock", "channels": "gpu_channel", "remote_buffers": "remote_buffer",
            "semaphores": "semaphore"},
    "gpu_channel": {"rank_groups": "rank_group"},
    "threadblock": {"ops": "op", "channels": "tb_channel", "remote_buffer_refs": "remote_buffer_ref"},
    "op": {"src_buff": "buff", "dst_buff": "buff", "ops": "op", "tbg_info": "tbg_info",
           "iter_context": "iter_context"},
}


def check_schema(obj, allow_ignored: bool = False) -> list[str]:
    """One line per missing required field or field the executor does not read (JSON path first)."""
    out: list[str] = []
    _check(obj, "plan", "", out, allow_ignored)
    return out


def _check(obj, level: str, path: str, out: list[str], allow_ignored: bool) -> None:
    spec = SCHEMA[level]
    if not isinstance(obj, dict):
        out.append(f"{path or '.'}: expected an object")
        return
    for key in sorted(spec.required - obj.keys()):
        out.append(f"{_join(path, key)}: required by the executor, missing")
    for key in obj:
        if key in spec.required or key in spec.optional:
            continue
        if allow_ignored and key in spec.ignored:
            continue
        out.append(f"{_join(path, key)}: not a field the executor reads")
    for key, child in _CHILDREN.get(level, {}).items():
        if key not in obj:
            continue
        value = obj[key]
        if isinstance(value, list):
            for i, item in enumerate(value):
                _check(item, child, f"{_join(path, key)}[{i}]", out, allow_ignored)
        else:
            _check(value, child, _join(path, key), out, allow_ignored)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
