"""Where a launch's ranks run: its hosts and the ranks on each.

A launch joined from torchrun or mpirun (:mod:`msccl_py.comm.join`) finds its
layout from each rank's host name (or ``MSCCL_PY_HOST``); ranks on one host
share memory, connections between hosts go over an engine. The communicator,
the library's selection and the debug lines read it.

>>> LaunchLayout.of(["a", "a", "b", "b"]).describe()
'2 hosts x 2 ranks (a: ranks 0-1, b: ranks 2-3)'
>>> LaunchLayout.of(["a", "a", "b", "b"]).shape, parse_shape("2x8")
('2x2', (2, 8))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from msccl_py.errors import MscclError


@dataclass(frozen=True)
class LaunchLayout:
    """Hosts and the ranks on each, in order of their lowest rank."""

    hosts: tuple[str, ...]
    ranks: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, host_of_rank: list[str]) -> LaunchLayout:
        names = tuple(dict.fromkeys(host_of_rank))
        return cls(names, tuple(tuple(r for r, h in enumerate(host_of_rank) if h == name)
                                for name in names))

    @property
    def ranks_per_host(self) -> int | None:
        """Ranks per host when every host has as many, else None."""
        sizes = {len(r) for r in self.ranks}
        return sizes.pop() if len(sizes) == 1 else None

    @property
    def gpus_per_node(self) -> int | None:
        """What the library's hierarchical programs need: ranks per host when the hosts hold
        equal, consecutive rank ranges and there is more than one host, else None."""
        per = self.ranks_per_host
        if len(self.hosts) < 2 or per is None:
            return None
        if any(list(rs) != list(range(k * per, (k + 1) * per)) for k, rs in enumerate(self.ranks)):
            return None
        return per

    @property
    def shape(self) -> str | None:
        """``HOSTSxRANKS`` (what ``simulate --layout`` and ``tune --layout`` take) when the hosts
        hold equal, consecutive rank ranges, else None."""
        per = self.ranks_per_host
        if per is None or (len(self.hosts) > 1 and self.gpus_per_node is None):
            return None
        return f"{len(self.hosts)}x{per}"

    def describe(self) -> str:
        """``2 hosts x 2 ranks (a: 0-1, b: 2-3)``."""
        per = self.ranks_per_host
        shape = (f"{len(self.hosts)} host{'s' if len(self.hosts) != 1 else ''} x {per} "
                 f"rank{'s' if per != 1 else ''}" if per is not None
                 else f"{len(self.hosts)} hosts of {', '.join(str(len(r)) for r in self.ranks)} "
                      f"ranks")
        return shape + " (" + ", ".join(f"{h}: {_span(rs)}" for h, rs in
                                        zip(self.hosts, self.ranks)) + ")"


def _span(ranks: tuple[int, ...]) -> str:
    if len(ranks) > 1 and list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "rank" + ("s " if len(ranks) > 1 else " ") + ",".join(map(str, ranks))


def parse_shape(text: str) -> tuple[int, int]:
    """``HOSTSxRANKS`` (``2x8``: 2 hosts of 8 ranks each) as ``(hosts, ranks per host)``."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise MscclError(f"a layout is HOSTSxRANKS, e.g. 2x8 (2 hosts of 8 ranks each); got "
                         f"{text!r}")
    return int(m.group(1)), int(m.group(2))
