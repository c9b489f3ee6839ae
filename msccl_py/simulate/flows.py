"""Transfers in flight that share resources max-min fairly, as they start and stop.

A proxy's transfers (an MSCCL++ port channel's RDMA writes) are not paced by
a threadblock: each takes what its path's resources leave it, and a NIC
carrying one transfer gives it all its bandwidth. :class:`Flows` keeps the
transfers in flight, recomputes every rate by progressive filling (each
resource's capacity split equally among its unfrozen transfers, the tightest
resource first) whenever one starts or ends, and says which ends next.

>>> f = Flows([10.0])                # one resource of 10 bytes/µs
>>> f.start("a", 100.0, (0,))
>>> f.start("b", 50.0, (0,))
>>> f.next_done()                    # both at 5 B/µs: b's 50 bytes end first
(10.0, 'b')
>>> f.advance(10.0); f.finish("b")
>>> f.next_done()                    # a, alone, has 50 bytes left at 10 B/µs
(15.0, 'a')
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence


class Flows:
    """Transfers sharing resources of the given capacities (bytes/µs), in time order:
    ``advance(t)`` moves the clock, ``start``/``finish`` change what is in flight."""

    def __init__(self, capacity: Sequence[float]):
        self.capacity = list(capacity)
        self.now = 0.0
        self._left: dict = {}
        self._res: dict = {}
        self._rate: dict = {}
        self._stale = False
        self._next: tuple | None = None

    def __len__(self) -> int:
        return len(self._left)

    def start(self, fid: Hashable, nbytes: float, resources: tuple[int, ...]) -> None:
        """Put ``nbytes`` in flight over ``resources`` from now."""
        self._left[fid] = float(nbytes)
        self._res[fid] = resources
        self._stale = True
        self._next = None

    def finish(self, fid: Hashable) -> None:
        """Take ``fid`` out (it has ended)."""
        del self._left[fid], self._res[fid]
        self._rate.pop(fid, None)
        self._stale = True
        self._next = None

    def advance(self, t: float) -> None:
        """Move the clock to ``t``, draining every transfer at its rate."""
        dt = t - self.now
        if dt > 0:
            rates = self._rates()
            for fid in self._left:
                r = rates[fid]
                self._left[fid] = 0.0 if math.isinf(r) else max(0.0, self._left[fid] - r * dt)
            self.now = t

    def next_done(self) -> tuple[float, Hashable] | None:
        """(time, id) of the transfer that ends first, None when none is in flight."""
        if self._next is not None or not self._left:
            return self._next
        best = None
        rates = self._rates()
        for fid, left in self._left.items():
            r = rates[fid]
            t = self.now if left <= 0 or math.isinf(r) else self.now + left / r
            if best is None or t < best[0]:
                best = (t, fid)
        self._next = best
        return best

    def _rates(self) -> dict:
        if self._stale:
            self._rate = _fill(self._res, self.capacity)
            self._stale = False
        return self._rate


def _fill(flows: dict, capacity: Sequence[float]) -> dict:
    """Max-min fair rates: raise every unfrozen flow's rate equally until a resource is
    full, freeze the flows on it, repeat."""
    users = defaultdict(list)
    for fid, res in flows.items():
        for r in res:
            users[r].append(fid)
    left = {r: float(capacity[r]) for r in users}
    count = {r: len(u) for r, u in users.items()}
    rate = {fid: math.inf for fid, res in flows.items() if not res}
    while count:
        r = min(count, key=lambda k: left[k] / count[k])
        level = left[r] / count[r]
        for fid in users[r]:
            if fid in rate:
                continue
            rate[fid] = level
            for k in flows[fid]:
                left[k] -= level
                count[k] -= 1
                if not count[k]:
                    del count[k]
    return rate
