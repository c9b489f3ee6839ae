"""The backends, by name: one registry (:data:`msccl_py.plan.contract.BACKENDS`), one interface.

A backend is a module with a ``run`` function (and, for communicators, a
``launch``) plus one :class:`~msccl_py.plan.contract.Backend` entry that
names them and says what they run. The CLI (``msccl-py run``),
``msccl_py.launch`` and the communicator ask here; nothing else lists
backend names.

>>> get("reference").devices, "emulated" in runnable()
('cpu', True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Protocol

from msccl_py.errors import MscclRuntimeError
from msccl_py.plan.contract import BACKENDS, Backend as Registration


class Backend(Protocol):
    """What a caller of a backend may rely on: its capabilities and ``run``."""

    name: str
    dtypes: tuple[str, ...]
    ops: tuple[str, ...]
    collectives: frozenset[str]
    processes: str
    devices: str

    def run(self, alg, inputs: Sequence, op: str = "sum", inplace: bool | None = None,
            **options) -> list:
        """Each rank's output of one call of ``alg`` on ``inputs``."""


class _Loaded:
    """A registration whose ``run`` imports the backend's module on first use."""

    def __init__(self, reg: Registration):
        self.reg = reg
        self.name, self.dtypes, self.ops = reg.name, reg.dtypes, reg.ops
        self.collectives, self.processes, self.devices = (reg.collectives, reg.processes,
                                                          reg.devices)

    @property
    def run(self) -> Callable:
        return _load(self.name, self.reg.run)


def _load(name: str, spec: str) -> Callable:
    module, func = spec.split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ImportError as exc:
        raise MscclRuntimeError(f"backend {name!r} is unavailable here: {exc}") from None
    except AttributeError:
        raise MscclRuntimeError(f"backend {name!r} is unavailable here: {module} has no "
                                f"{func}()") from None


def runnable() -> tuple[str, ...]:
    """The backends that run an algorithm by name (``msccl-py run --backend``)."""
    return tuple(name for name, reg in BACKENDS.items() if reg.run)


def get(name: str) -> Backend:
    """Backend ``name``; a one-line error when there is none of that name."""
    reg = BACKENDS.get(name)
    if reg is None or not reg.run:
        raise MscclRuntimeError(f"unknown backend {name!r}; choose one of "
                                f"{', '.join(runnable())}")
    return _Loaded(reg)


def launcher(name: str) -> Callable | None:
    """Backend ``name``'s ``launch`` (communicators in rank processes), None if it has none."""
    reg = BACKENDS.get(name)
    return _load(name, reg.launch) if reg is not None and reg.launch else None


def communicators() -> tuple[str, ...]:
    """The backends :func:`launcher` starts."""
    return tuple(name for name, reg in BACKENDS.items() if reg.launch)
