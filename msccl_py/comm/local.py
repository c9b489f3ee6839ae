"""``msccl_py.launch``: start the ranks on this machine, with the library choosing programs.

The runtime's :func:`~msccl_py.runtime.communicator.launch` runs ranks but
knows no library (the runtime sits below it); this front end gives each rank
the library's :class:`~msccl_py.comm.selector.Selector`, which also follows
``MSCCL_PY_ALGO_DIR``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from msccl_py.comm.selector import Selector
from msccl_py.runtime import backends
from msccl_py.runtime.communicator import launch as run_ranks


def launch(fn: Callable, world_size: int, backend: str = "shm", args: Sequence = (),
           **options) -> list:
    """Run ``fn(comm, *args)`` in ``world_size`` processes; their return values in rank order.

    ``options`` are :func:`msccl_py.runtime.communicator.launch`'s (``timeout``,
    ``start_method``, ``buffsize``, ``programs``, ``grace``).

    >>> def work(comm):
    ...     return comm.rank
    >>> launch(work, 2)                            # doctest: +SKIP
    [0, 1]
    """
    options.setdefault("selector", Selector)
    start = backends.launcher(backend)
    if start is None:   # the runtime's launch says what backends there are
        return run_ranks(fn, world_size, backend, args, **options)
    # a communicator option this backend's launch does not take is dropped; a misspelt
    # one still raises
    accepted, known = (inspect.signature(f).parameters for f in (start, run_ranks))
    return start(fn, world_size, args=args, **{k: v for k, v in options.items()
                                               if k in accepted or k not in known})
