"""Compiling library programs by name, with the on-disk cache in front.

>>> alg = compile("allreduce_ring", num_ranks=4, use_cache=False)
>>> xml = compile_xml("allgather_ring", 8, instances=2, use_cache=False)
>>> alg.ngpus, xml.startswith("<algo")
(4, True)
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

from msccl_py import ir, toolchain
from msccl_py.errors import MscclError, ProgramError
from msccl_py.library import cache, registry
from msccl_py.library.fit import fit_program, wider_spread

#: the target whose limits :func:`compile` fits a program to when given none: the IR is for
#: our own runtimes, so the most permissive dialect that can name the collective (msccl: 256
#: steps per threadblock; gather/scatter only exist in msccl-executor)
CACHE_TARGETS = {"gather": "msccl-executor", "scatter": "msccl-executor"}
CACHE_TARGET = "msccl"

# the IR's JSON per key: parsing it again hands out a private copy faster than deepcopy
_memo: dict[str, str] = {}


def _request(name: str, num_ranks: int, instances: int, protocol: str | None,
             params: dict[str, Any], target: str | None = None
             ) -> tuple[registry.Entry, str, dict[str, Any]]:
    entry = registry.entry(name)
    spec = entry.spec
    values = spec.resolve(num_ranks, params, target)
    if isinstance(instances, bool) or not isinstance(instances, int) \
            or not 1 <= instances <= spec.max_instances:
        raise ProgramError(f"program {name}: instances must be an integer in "
                           f"1..{spec.max_instances}, got {instances!r}")
    protocol = spec.protocol if protocol is None else protocol
    if protocol not in ir.PROTOCOLS:
        raise ProgramError(f"program {name}: unknown protocol {protocol!r}; "
                           f"use one of {', '.join(ir.PROTOCOLS)}")
    return entry, protocol, values


def build_program(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
                  **params: Any):
    """Run program ``name``'s build function and return the finished ``MSCCLProgram``.

    Parameters are checked against the program's declaration first; the
    program's own postcondition check must pass.

    >>> build_program("allgather_ring", 4).num_ranks
    4
    """
    entry, protocol, values = _request(name, num_ranks, instances, protocol, params)
    spread = entry.spec.spread
    if spread is not None and values[spread] is None:  # unfitted: the fewest channels
        values[spread] = entry.spec.param(spread).low or 1
    prog = entry.builder(num_ranks, instances=instances, protocol=protocol, **values)
    if not prog.check():
        raise ProgramError(f"program {name} at {num_ranks} ranks with {values} fails its "
                           f"collective's postcondition (wrong chunks listed on stderr)",
                           file=str(entry.path))
    return prog


def fit(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
        target: str | None = None, **params: Any):
    """``(program, lowered IR, parameters used)`` of ``name`` within ``target``'s limits.

    When the program's ``spread`` parameter is left unset it starts at its
    lowest value and grows until every threadblock's XML steps (which shrink
    about in proportion) fit the target; ``target=None`` means the DSL's
    default for the collective. A request that cannot fit raises
    :class:`~msccl_py.errors.LimitError` naming the limit and what to pass.

    >>> prog, alg, values = fit("allreduce_ring", 64, target="msccl-executor")
    >>> values["channels"], alg.nchannels
    (2, 2)
    """
    entry, protocol, values = _request(name, num_ranks, instances, protocol, params, target)
    return fit_program(entry.spec, num_ranks, values, target, lambda v: build_program(
        name, num_ranks, instances, protocol, **v))


def _key(entry: registry.Entry, num_ranks: int, instances: int, protocol: str,
         values: dict[str, Any], target: str) -> str:
    return cache.cache_key({"name": entry.spec.name, "num_ranks": num_ranks,
                            "instances": instances, "protocol": protocol, "params": values,
                            "target": target, "source": entry.source_hash})


def artifact(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
             target: str | None = None, **params: Any) -> toolchain.Artifact:
    """The toolchain's artifact of program ``name`` fitted to ``target`` (no cache).

    >>> art = artifact("allgather_ring", 4, target="msccl")
    >>> art.target, art.verdict.status
    ('msccl', 'ok')
    """
    prog = fit(name, num_ranks, instances, protocol, target, **params)[0]
    # build_program ran the collective's check on this very trace
    return toolchain.compile(prog.recording(), target)


def xml_artifact(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
                 target: str | None = None, cache_dir: str | os.PathLike | None = None,
                 use_cache: bool = True, **params: Any) -> toolchain.Artifact:
    """:func:`artifact` of program ``name`` for ``target``, its XML and notes cached on disk.

    A cache hit gives the text and notes the build made (no IR: read the text for that).

    >>> xml_artifact("barrier_dissemination", 4, use_cache=False).notes  # doctest: +ELLIPSIS
    ["note: barrier_dissemination: collective 'custom' runs only on target msccl; ..."]
    """
    entry, protocol, values = _request(name, num_ranks, instances, protocol, params, target)
    directory = cache.cache_dir(cache_dir)
    key = _key(entry, num_ranks, instances, protocol, values, target)
    if use_cache:
        stored = cache.load(directory, key, cache.XML)
        if stored is not None:
            try:
                text, notes, written = _xml_entry(stored)
            except MscclError:
                cache.discard(directory, key, cache.XML)
            else:
                return toolchain.Artifact(name, written, text=text, notes=notes)
    art = artifact(name, num_ranks, instances, protocol, target, **values)
    if use_cache:
        cache.store(directory, key, json.dumps({"target": art.target, "notes": art.notes,
                                                "text": art.text}), cache.XML)
    return art


def _xml_entry(stored: str) -> tuple[str, list[str], str]:
    try:
        data = json.loads(stored)
        return data["text"], list(data["notes"]), data["target"]
    except (ValueError, KeyError, TypeError) as exc:
        raise MscclError(f"unreadable cache entry: {exc}") from None


def compile_xml(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
                target: str | None = None, cache_dir: str | os.PathLike | None = None,
                use_cache: bool = True, **params: Any) -> str:
    """XML text of program ``name`` for runtime dialect ``target``, cached on disk.

    ``target=None`` lets the DSL choose (msccl-executor, or msccl for custom
    collectives the newer runtimes cannot name).

    >>> 'proto="LL"' in compile_xml("allreduce_ring", 8, protocol="LL", use_cache=False)
    True
    """
    return xml_artifact(name, num_ranks, instances, protocol, target, cache_dir, use_cache,
                        **params).text


def compile(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
            cache_dir: str | os.PathLike | None = None, use_cache: bool = True,
            target: str | None = None, **params: Any) -> ir.Algorithm:
    """Lowered IR of program ``name`` at ``num_ranks`` ranks, cached on disk and in memory.

    The IR is built, judged and verified by the toolchain (with the verified
    ``maxBytes``), and stored as IR (see :mod:`msccl_py.toolchain.persist`): a
    cache hit gives back exactly what a build returns. An entry that cannot
    be read (written by another version) is discarded and rebuilt. A
    program past the limits of every runtime that can name its collective
    (e.g. more than 32 channels) raises :class:`~msccl_py.errors.LimitError`.
    ``target`` fits the program to that runtime's limits instead (see :func:`fit`).

    >>> alg = compile("allreduce_ring", num_ranks=4, instances=2, use_cache=False)
    >>> alg.ngpus, alg.nchannels
    (4, 2)
    """
    entry, protocol, values = _request(name, num_ranks, instances, protocol, params, target)
    directory = cache.cache_dir(cache_dir)
    target = target or _cache_target(entry.spec)
    key = _key(entry, num_ranks, instances, protocol, values, target)
    if use_cache:
        if key in _memo:
            return toolchain.algorithm_from_json(_memo[key])
        text = cache.load(directory, key, cache.IR)
        if text is not None:
            try:
                alg = toolchain.algorithm_from_json(text)
            except MscclError:
                cache.discard(directory, key, cache.IR)
            else:
                _memo[key] = text
                return alg
    # the whole pipeline even without the cache, so both paths apply the same limits
    alg = toolchain.compile(fit(name, num_ranks, instances, protocol, target, **values)[0]
                            .recording(), target, toolchain.Policy(text=False)).algorithm
    if use_cache:
        text = toolchain.algorithm_to_json(alg)
        cache.store(directory, key, text, cache.IR)
        _memo[key] = text
    return alg


def _cache_target(spec) -> str:
    """The runtime whose limits :func:`compile` fits a program to when given no target."""
    return CACHE_TARGETS.get(spec.operation, CACHE_TARGET)


def plan_artifact(name: str, num_ranks: int, gpus_per_node: int | None = None,
                  **kwargs: Any) -> toolchain.Artifact:
    """The MSCCL++ plan artifact of program ``name``, fitted to the MSCCL++ executor.

    A program's ``spread`` parameter (e.g. ``channels``), left unset, grows
    until each threadblock's steps fit the executor's operations, as XML
    targets' step limits do (longer threadblocks would be cut into segments
    that run one after another). When the plan's chunk count lets no
    power-of-two message size through the executor's size rule, the
    program's ``chunking`` (or unset ``spread``) parameter, when the user left
    it unset, moves to the nearest value that does, and a note says so.
    ``kwargs`` are :func:`compile`'s (parameters, ``instances``, ``protocol``).

    >>> plan_artifact("allgather_ring", 4).plan.collective
    'allgather'
    """
    from msccl_py.plan.mscclpp.geometry import message_quantum, runs_powers_of_two
    from msccl_py.targets.mscclpp.emit import MAX_STEPS_PER_TB, longest_threadblock
    from msccl_py.toolchain.pipeline import plan_chunks, plan_sizes_note
    spec = registry.get(name)
    params = dict(kwargs)
    while True:
        alg = compile(name, num_ranks, **params)
        auto = spec.spread is not None and spec.spread not in kwargs
        wider = wider_spread(spec, num_ranks, fitted_values(name, num_ranks, **params),
                             longest_threadblock(alg), MAX_STEPS_PER_TB) if auto else None
        if wider is None:
            break
        params[spec.spread] = wider
    policy = toolchain.Policy(gpus_per_node=gpus_per_node)
    art = toolchain.compile(alg, toolchain.MSCCLPP, policy)
    if runs_powers_of_two(art.plan):
        return art
    knob = spec.chunking if spec.chunking is not None else spec.spread
    natural = params.get(knob) if knob is not None else None
    if knob is not None and natural is None:
        natural = alg.nchannels // params.get("instances", 1)
    better = _nearest_count(spec, num_ranks, params, knob, natural, art.plan, policy)
    if better is None or knob in kwargs:
        hint = (f"; --param {knob}={better[0]} would run at every power of two from 1 MiB"
                if better else "")
        return replace(art, notes=[f"note: {plan_sizes_note(name, art.plan, hint)}"])
    value, found = better
    return replace(found, notes=[
        f"note: {name}: {knob}={natural} cuts each buffer into {plan_chunks(art.plan)}, and the "
        f"MSCCL++ executor runs such a plan only at message sizes that are multiples of "
        f"{message_quantum(art.plan)} B, so at no power of two; using {knob}={value} instead "
        f"({plan_chunks(found.plan)}: every power of two from "
        f"{max(message_quantum(found.plan), 1)} B up); pass --param {knob}={natural} to keep "
        f"{natural}"])


def _nearest_count(spec, num_ranks: int, params: dict, knob, natural, plan,
                   policy: toolchain.Policy) -> tuple[int, toolchain.Artifact] | None:
    """(value, plan artifact) for the value of ``knob`` nearest ``natural`` whose plan the
    executor runs at every power of two from 1 MiB, or None. Chunk counts grow in proportion
    to ``knob``, which rules most values out before they are built."""
    if knob is None or not natural:
        return None
    from msccl_py.plan.mscclpp.geometry import message_quantum, runs_powers_of_two
    from msccl_py.targets.mscclpp.emit import lower
    p = spec.param(knob)
    quantum = message_quantum(plan)
    low, high = p.low or 1, p.high or 2 * natural
    for value in sorted(range(low, high + 1), key=lambda v: (abs(v - natural), -v)):
        scaled = quantum * value
        if value == natural or scaled % natural or (1 << 20) % (scaled // natural) \
                or spec.unsupported(num_ranks, {**params, knob: value}) is not None:
            continue
        try:
            alg = compile(spec.name, num_ranks, **{**params, knob: value})
            if not runs_powers_of_two(lower(alg, policy.gpus_per_node)):
                continue
            return value, toolchain.compile(alg, toolchain.MSCCLPP, policy)
        except MscclError:
            continue
    return None


def fitted_values(name: str, num_ranks: int, instances: int = 1, protocol: str | None = None,
                  **params: Any) -> dict[str, Any]:
    """The parameter values :func:`compile` builds ``name`` with when given no target
    (defaults filled in, the ``spread`` parameter fitted); builds the program to find them.

    >>> fitted_values("allreduce_ring", 64)["channels"]
    1
    """
    return fit(name, num_ranks, instances, protocol, _cache_target(registry.get(name)),
               **params)[2]


def parse_param_values(name: str, items: list[str]) -> dict[str, Any]:
    """Turn ``["k=v", ...]`` into typed parameters of program ``name``.

    >>> parse_param_values("allreduce_ring", ["channels=2"])
    {'channels': 2}
    """
    spec = registry.get(name)
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ProgramError(f"program {name}: parameter {item!r} must look like name=value")
        if key in values:
            raise ProgramError(f"program {name}: parameter {key} given twice")
        values[key] = spec.param(key).convert(text.strip(), name)
    return values
