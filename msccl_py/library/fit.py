"""Fitting a library program to a target's limits: widen its spread parameter or say how.

A program whose threadblocks carry more steps than the target allows is rebuilt
with a wider ``spread`` (more channels or pieces) when the user left it open;
otherwise the error names what to pass instead.
"""

from __future__ import annotations

from typing import Any, Callable

from msccl_py import ir
from msccl_py.errors import LimitError
from msccl_py.targets.msccl.dialects import (DIALECTS, check_limits, default_target, get_dialect,
                                             xml_step_count)


def fit_program(spec, num_ranks: int, values: dict[str, Any], target: str | None,
                make: Callable[[dict[str, Any]], Any]):
    """:func:`fit` for a program built by ``make(values)`` (a script's own build, too)."""
    spread = spec.spread
    auto = spread is not None and values.get(spread) is None
    if auto:
        values = {**values, spread: spec.param(spread).low or 1}
    while True:
        prog = make(values)
        alg = prog.lower()
        dialect = get_dialect(target or default_target(alg.collective))
        try:
            check_limits(alg, dialect)
            return prog, alg, values
        except LimitError as exc:
            worst = max((xml_step_count(tb) for _, tb in alg.threadblocks()), default=0)
            wider = wider_spread(spec, num_ranks, values, worst, dialect.max_steps_per_tb)
            if auto and wider is not None:
                values = {**values, spread: wider}
                continue
            raise LimitError(f"program {spec.name} at {num_ranks} ranks"
                             f"{_shown(spec, values)}: {exc}; "
                             f"{_advice(spec, alg, dialect.name, values, worst, wider)}") from None


def wider_spread(spec, num_ranks: int, values: dict[str, Any], worst: int,
                 limit: int) -> int | None:
    """The next ``spread`` value to try when ``worst`` steps per threadblock exceed
    ``limit``, or None (no spread parameter, or none wider is allowed)."""
    if spec.spread is None or worst <= limit:
        return None
    now = values[spec.spread]
    want = max(now + 1, -(-now * worst // limit))
    high = spec.param(spec.spread).high
    for value in (want, high):
        if value is not None and value > now and (high is None or value <= high) and \
                spec.unsupported(num_ranks, {**values, spec.spread: value}) is None:
            return value
    return None


def _shown(spec, values: dict[str, Any]) -> str:
    """`` with k=v, ...`` for the parameters that differ from their defaults."""
    changed = [f"{p.name}={values[p.name]}" for p in spec.params
               if values.get(p.name) != p.default]
    return f" with {', '.join(changed)}" if changed else ""


def _advice(spec, alg: ir.Algorithm, target: str, values: dict[str, Any], worst: int,
            wider: int | None) -> str:
    """What to pass instead: a wider ``spread``, or a target the program fits as it is."""
    options = []
    if wider is not None:
        options.append(f"pass --param {spec.spread}={wider} or more")
    for other in DIALECTS:
        if other != target:
            try:
                check_limits(alg, other)
            except LimitError:
                continue
            options.append(f"--target {other} fits it as it is")
    if not options:
        options.append("use fewer ranks or instances, or another program (`msccl-py list`)")
    return "; or ".join(options)
