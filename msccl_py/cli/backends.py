"""The backends ``msccl-py run`` calls an XML algorithm on, by name, imported on use."""

from __future__ import annotations

import importlib

from msccl_py.errors import MscclRuntimeError

#: backend name -> "module:function"
BACKENDS = {
    "reference": "msccl_py.runtime.reference:run",
    "shm": "msccl_py.runtime.shm:run",
    "cupy": "msccl_py.runtime.cupy:run",
    "emulated": "msccl_py.runtime.cupy.emulation:emulated_run",
}


def get_backend(name: str):
    """The run function of backend ``name``; a one-line error when unknown or unavailable."""
    spec = BACKENDS.get(name)
    if spec is None:
        raise MscclRuntimeError(f"unknown backend {name!r}; choose one of "
                                f"{', '.join(BACKENDS)}")
    module, func = spec.split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ImportError as exc:
        raise MscclRuntimeError(f"backend {name!r} is unavailable here: {exc}") from None
    except AttributeError:
        raise MscclRuntimeError(f"backend {name!r} is unavailable here: {module} has no "
                                f"{func}()") from None
