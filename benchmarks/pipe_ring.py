"""BASELINE, not part of msccl_py: a pipe-based collective library like the seed's.

A minimal re-implementation, from its description in
``../shared/seeds/nccl_in_500_locs_mpi.txt``, of the seed's design: ranks are
OS processes, every ordered pair of ranks has a ``multiprocessing.Pipe``,
and NumPy arrays travel pickled through them. Collectives follow the seed's
algorithms: ring reduce-scatter + ring allgather for allreduce, a ring for
allgather, pairwise exchange for alltoall, a dissemination barrier. It exists
only so that ``cpu_collectives.py`` can time the seed's approach next to the
shared-memory runtime in the same run.
"""

from __future__ import annotations

import threading

import numpy as np

#: above this many bytes a send goes through a helper thread: every rank of a ring
#: sends before it receives, and a pipe's kernel buffer holds far less than 64 MiB
#: (the seed's code deadlocks there)
DIRECT_SEND_BYTES = 32 << 10

_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


class PipeComm:
    """One rank's view of the full mesh of pipes (``pipes[(me, peer)]``)."""

    def __init__(self, rank: int, world_size: int, pipes: dict):
        self.rank = rank
        self.world_size = world_size
        self.pipes = pipes

    def _send(self, peer: int, data) -> None:
        self.pipes[(self.rank, peer)].send(data)

    def _recv(self, peer: int):
        return self.pipes[(self.rank, peer)].recv()

    def _exchange(self, to: int, data: np.ndarray, frm: int):
        """Send ``data`` to ``to`` while receiving from ``frm``."""
        if data.nbytes <= DIRECT_SEND_BYTES:
            self._send(to, data)
            return self._recv(frm)
        sender = threading.Thread(target=self._send, args=(to, data))
        sender.start()
        got = self._recv(frm)
        sender.join()
        return got

    def barrier(self) -> None:
        dist = 1
        while dist < self.world_size:
            self._send((self.rank + dist) % self.world_size, True)
            self._recv((self.rank - dist) % self.world_size)
            dist <<= 1

    def all_reduce(self, x: np.ndarray, op: str = "sum") -> np.ndarray:
        n, r = self.world_size, self.rank
        if n == 1:
            return x.copy()
        f = _UFUNCS[op]
        data = x.copy()
        k = -(-data.size // n)
        nxt, prv = (r + 1) % n, (r - 1) % n
        for step in range(n - 1):            # ring reduce-scatter
            send = (r - step) % n
            incoming = self._exchange(nxt, data[send * k:(send + 1) * k], prv)
            got = (send - 1) % n
            part = data[got * k:(got + 1) * k]
            f(part, incoming, out=part)
        for step in range(n - 1):            # ring allgather of the reduced blocks
            send = (r + 1 - step) % n
            incoming = self._exchange(nxt, data[send * k:(send + 1) * k], prv)
            got = (send - 1) % n
            data[got * k:(got + 1) * k] = incoming
        return data

    def all_gather(self, x: np.ndarray) -> np.ndarray:
        n, r = self.world_size, self.rank
        parts = [None] * n
        parts[r] = x
        idx = r
        for _ in range(n - 1):
            incoming = self._exchange((r + 1) % n, parts[idx], (r - 1) % n)
            idx = (idx - 1) % n
            parts[idx] = incoming
        return np.concatenate(parts)

    def all_to_all(self, x: np.ndarray) -> np.ndarray:
        n, r = self.world_size, self.rank
        k = x.size // n
        parts = [None] * n
        parts[r] = x[r * k:(r + 1) * k]
        for turn in range(1, n):
            to, frm = (r + turn) % n, (r - turn) % n
            parts[frm] = self._exchange(to, x[to * k:(to + 1) * k], frm)
        return np.concatenate(parts)


def make_pipes(world_size: int, ctx) -> dict:
    """The seed's mesh: one duplex pipe per unordered pair, an end for each direction."""
    pipes = {}
    for i in range(world_size):
        for j in range(i + 1, world_size):
            a, b = ctx.Pipe()
            pipes[(i, j)] = a
            pipes[(j, i)] = b
    return pipes
