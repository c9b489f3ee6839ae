"""Which program a joined communicator runs for a call, and why.

In order: a file of ``$MSCCL_PY_ALGO_DIR`` that serves the call under its
dialect's rule (:mod:`.algo_dir`), else the library's choice
(:func:`msccl_py.library.select`) for the launch's layout: with several
hosts of equal, consecutive rank ranges the hierarchical programs take part
(``gpus_per_node`` = ranks per host), and the library prefers them where
they apply. Each answer carries its reason, which ``MSCCL_PY_DEBUG=INFO``
prints on a collective's first call in a size class.

>>> Selector(4)("allreduce", 1 << 20).name
'allreduce_allpairs'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from msccl_py import ir
from msccl_py.comm import debug
from msccl_py.comm.algo_dir import AlgoDir, from_environment
from msccl_py.errors import XmlError


@dataclass
class Pick:
    """One program for a call: how to build it, what to call it, and why it was chosen."""

    ident: tuple
    name: str
    params: dict[str, Any]
    why: str
    build: Callable[[], ir.Algorithm] = field(repr=False)


class Selector:
    """Programs for a communicator of ``world_size`` ranks in ``layout`` (a
    :class:`~msccl_py.comm.join.LaunchLayout`, or None for one host)."""

    def __init__(self, world_size: int, layout=None, algo_dir: AlgoDir | None = None,
                 use_environment: bool = True):
        self.world_size = world_size
        self.layout = layout
        self.algo_dir = algo_dir if algo_dir is not None or not use_environment \
            else from_environment()
        self._announced: set[tuple[str, str]] = set()

    @property
    def gpus_per_node(self) -> int | None:
        return self.layout.gpus_per_node if self.layout is not None else None

    def __call__(self, collective: str, nbytes: int, root: int = 0, itemsize: int = 4,
                 inplace: bool = False) -> Pick:
        if self.algo_dir is not None:
            hit = self.algo_dir.pick(collective, self.world_size, nbytes, itemsize, inplace)
            if hit is not None:
                meta, why = hit
                return Pick(("file", meta.path), f"{meta.path}", {}, why,
                            lambda: self.algo_dir.read(meta))
        from msccl_py import library
        sel = library.select(collective, self.world_size, nbytes, root=root,
                             gpus_per_node=self.gpus_per_node)
        ident = (sel.name, sel.protocol, sel.instances,
                 tuple(sorted((k, repr(v)) for k, v in sel.params.items())))
        why = "library: " + (sel.reason or "its choice")
        if self.algo_dir is not None:
            why = f"no {self.algo_dir.path} file serves it; {why}"

        def build() -> ir.Algorithm:
            try:
                return sel.compile()
            except XmlError:
                # the library caches XML, which cannot spell every collective (gather,
                # scatter): lower the program directly instead
                return library.build_program(sel.name, self.world_size, sel.instances,
                                             sel.protocol, **sel.params).lower()
        return Pick(ident, sel.name, dict(sel.params, protocol=sel.protocol,
                                          instances=sel.instances), why, build)

    def chosen(self, rank: int, collective: str, nbytes: int, choice,
               alg: ir.Algorithm | None, why: str) -> None:
        """Report a collective's first program in a size class (``MSCCL_PY_DEBUG=INFO``)."""
        key = (collective, debug.size_class(nbytes))
        if key in self._announced:
            return
        self._announced.add(key)
        debug.chose(rank, collective, nbytes, choice, alg, why)
