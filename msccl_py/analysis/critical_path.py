"""Critical path: the longest chain of communication steps through the program.

Edges inside a GPU (threadblock order, ``depends``) cost nothing; each
send→receive edge costs one communication step (``weight="hops"``) or the
number of chunks it carries (``weight="chunks"``). Pipelining is ignored:
the result is the latency of one loop iteration in link traversals, the
quantity textbook step counts describe.

>>> from msccl_py import ir
>>> def tb(i, steps, send=-1, recv=-1):
...     return ir.Threadblock(i, send_peer=send, recv_peer=recv, steps=steps)
>>> s, r = ir.Step("send", ir.Loc("i", 0)), ir.Step("recv", dst=ir.Loc("o", 0))
>>> alg = ir.Algorithm("x", "custom", "Simple", False, 2, 1, 1, gpus=[
...     ir.Gpu(0, 1, 1, threadblocks=[tb(0, [s], send=1)]),
...     ir.Gpu(1, 1, 1, threadblocks=[tb(0, [r], recv=0)])])
>>> critical_path(alg).length
1
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from msccl_py import ir
from msccl_py.analysis.graph import StepRef, build_graph
from msccl_py.errors import VerificationError

WEIGHTS = ("hops", "chunks")


@dataclass
class CriticalPath:
    """Length of the longest chain and the chain itself (first step to last)."""

    length: int
    weight: str
    path: list[StepRef]

    @property
    def hops(self) -> list[tuple[StepRef, StepRef]]:
        """Consecutive pairs of the path that cross ranks (the communication steps)."""
        return [(a, b) for a, b in zip(self.path, self.path[1:]) if a.rank != b.rank]


def critical_path(alg: ir.Algorithm, weight: str = "hops") -> CriticalPath:
    """Longest weighted chain of steps of ``alg``, in linear time.

    Raises :class:`VerificationError` when the dependencies form a cycle
    (the program would hang), naming a step on it.

    >>> critical_path(ir.Algorithm("empty", "custom", "Simple", False, 0, 1, 1)).length
    0
    """
    if weight not in WEIGHTS:
        raise VerificationError(f"unknown critical-path weight {weight!r}; use one of {WEIGHTS}")
    graph = build_graph(alg)
    n = len(graph)
    indeg = [0] * n
    for edges in graph.succ:
        for target, _ in edges:
            indeg[target] += 1
    dist = [0] * n
    prev = [-1] * n
    ready = deque(i for i in range(n) if indeg[i] == 0)
    done = 0
    while ready:
        node = ready.popleft()
        done += 1
        for target, comm in graph.succ[node]:
            cost = (graph.steps[node].count if weight == "chunks" else 1) if comm else 0
            if prev[target] < 0 or dist[node] + cost > dist[target]:
                dist[target] = dist[node] + cost
                prev[target] = node
            indeg[target] -= 1
            if indeg[target] == 0:
                ready.append(target)
    if done < n:
        stuck = next(i for i in range(n) if indeg[i] > 0)
        raise VerificationError(
            f"dependency cycle: {graph.refs[stuck]} ({graph.steps[stuck].op}) can never run")
    if n == 0:
        return CriticalPath(0, weight, [])
    end = max(range(n), key=dist.__getitem__)
    path = []
    node = end
    while node >= 0:
        path.append(graph.refs[node])
        node = prev[node]
    path.reverse()
    return CriticalPath(dist[end], weight, path)
