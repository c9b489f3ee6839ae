"""The backends ``msccl-py run`` calls an XML algorithm on: the runtime's registry, by name."""

from __future__ import annotations

from msccl_py.runtime import backends as _registry

#: backend name -> "module:function" of its run (:data:`msccl_py.plan.contract.BACKENDS`)
BACKENDS = {name: _registry.BACKENDS[name].run for name in _registry.runnable()}


def get_backend(name: str):
    """The run function of backend ``name``; a one-line error when unknown or unavailable."""
    return _registry.get(name).run
