"""Winning size ranges: exact crossovers between simulated candidates, then near-ties merged.

:func:`partition` splits all sizes into parts, each won by one candidate
(the simulated best there): where the best changes between two sample
sizes, bisection over the integers finds the exact size. :func:`merge`
then joins neighbouring parts while one candidate stays within
``TOLERANCE`` (2%) of the best across all of them, so tied candidates
leave no ranges a few bytes wide. Sizes are nccl-tests' ``size``.

>>> times = {0: lambda n: 100 + n / 100, 1: lambda n: 101 + n / 101}
>>> timer = Timer(lambda i, n: times[i](n))
>>> parts = partition(timer, [1000, 100000], [0, 1])
>>> [(p.lo, p.hi, p.best) for p in parts]
[(0, 10100, 0), (10101, None, 1)]
>>> [(r.lo, r.hi, r.winner, round(r.worst, 4)) for r in merge(timer, parts)]
[(0, None, 0, 1.0082)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from msccl_py.errors import MscclError

#: a range's file may be this much slower than the best candidate anywhere inside it
TOLERANCE = 1.02
#: candidates this close to the best at a neighbouring sample may win between the samples
CONTENDER = 1.15


class Timer:
    """``time(i, nbytes)`` (µs; ``inf`` where candidate ``i`` cannot run), each pair once."""

    def __init__(self, time: Callable[[int, int], float]):
        self.time, self.memo = time, {}

    def __call__(self, i: int, nbytes: int) -> float:
        if (i, nbytes) not in self.memo:
            self.memo[i, nbytes] = self.time(i, nbytes)
        return self.memo[i, nbytes]

    def best(self, nbytes: int, among) -> int:
        """The fastest of ``among`` at ``nbytes`` (the lowest index among ties)."""
        return min(among, key=lambda i: (self(i, nbytes), i))


@dataclass
class Part:
    """Sizes ``lo``..``hi`` (inclusive; ``hi`` None = no bound) where ``best`` is the fastest.

    ``pool``: the candidates that were compared there (those within
    ``CONTENDER`` of the best at a neighbouring sample).
    """

    lo: int
    hi: int | None
    best: int
    samples: list[int] = field(default_factory=list)
    pool: set[int] = field(default_factory=set)


@dataclass
class Range:
    """Sizes ``lo``..``hi`` served by candidate ``winner``, which is within ``worst`` (a ratio)
    of the best across its ``parts``; ``file`` once written."""

    lo: int
    hi: int | None
    winner: int
    parts: list[Part]
    worst: float = 1.0
    file: Path | None = None

    @property
    def samples(self) -> list[int]:
        return [s for p in self.parts for s in p.samples]


def _last_win(timer: Timer, lo: int, hi: int, cur: int, among: list[int]) -> tuple[int, int]:
    """(last size where ``cur`` is the best of ``among``, first size where it is not) in [lo, hi].

    ``cur`` wins at ``lo`` and loses at ``hi``; they come back adjacent, so
    every size is decided (about 30 simulations of the contenders per crossover).
    """
    while hi - lo > 1:
        mid = min(max(int(round(math.sqrt(lo * hi))), lo + 1), hi - 1)
        if timer.best(mid, among) == cur:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _split(timer: Timer, sizes: list[int], among: list[int]) -> list[Part]:
    winners = []
    for s in sizes:
        best = timer.best(s, among)
        if math.isinf(timer(best, s)):
            raise MscclError(f"no candidate is verified for {s} bytes")
        winners.append(best)
    near = [{i for i in among if timer(i, s) <= CONTENDER * timer(w, s)}
            for s, w in zip(sizes, winners)]
    parts = [Part(0, None, winners[0], [sizes[0]], set(near[0]))]
    for j in range(1, len(sizes)):
        pool = near[j - 1] | near[j]
        cur, pos = parts[-1].best, sizes[j - 1]
        while cur != winners[j]:
            edge, pos = _last_win(timer, pos, sizes[j], cur, sorted(pool))
            parts[-1].hi = edge
            parts[-1].pool |= pool
            cur = timer.best(pos, sorted(pool))
            parts.append(Part(edge + 1, None, cur))
        parts[-1].samples.append(sizes[j])
        parts[-1].pool |= pool
    return parts


def partition(timer: Timer, sizes: list[int], among: list[int], rounds: int = 8) -> list[Part]:
    """Parts tiling [0, ∞), each won by one of ``among``; sizes below the first sample go to its
    winner, sizes past the last to the last's.

    Where a part's :func:`probes` find another candidate faster than its
    best (a winner that both neighbouring samples missed), those sizes
    become samples too and the parts are found again.
    """
    grid = sorted(set(sizes))
    for _ in range(rounds):
        parts = _split(timer, grid, among)
        missed = {s for p in parts for s in probes(p.lo, p.hi, grid)
                  if timer(timer.best(s, sorted(p.pool | {p.best})), s) < timer(p.best, s)}
        if not missed:
            break
        grid = sorted(set(grid) | missed)
    return parts


def probes(lo: int, hi: int | None, sizes: list[int]) -> list[int]:
    """Sizes where a candidate is compared with the best of ``lo..hi``: its ends, the samples
    inside, and the geometric midpoint of each gap, within the sampled sizes."""
    a = min(max(lo, sizes[0]), sizes[-1])
    b = sizes[-1] if hi is None else max(min(hi, sizes[-1]), a)
    points = sorted({a, b, *(s for s in sizes if a <= s <= b)})
    mids = {math.isqrt(x * y) for x, y in zip(points, points[1:]) if y - x > 1}
    return sorted(set(points) | mids)


def merge(timer: Timer, parts: list[Part],
          prefer: Callable[[int, int, int | None], float] = lambda i, lo, hi: 0) -> list[Range]:
    """Join neighbouring parts while one candidate stays within ``TOLERANCE`` of each part's best.

    Left to right, a range grows while some candidate compared in it is
    within 2% of the best at every :func:`probes` size of its parts
    (greedy growth gives the fewest ranges, as being within 2% of a
    longer stretch implies it of a shorter one). A range's candidate is
    the one with the lowest ``prefer(i, lo, hi)`` (the tuner counts sizes
    it cannot run), then the smallest worst ratio.
    """
    sizes = sorted(s for p in parts for s in p.samples)
    worst_in: dict[tuple[int, int, float], float] = {}

    def worst(c: int, k: int, cap: float = TOLERANCE) -> float:
        if (c, k, cap) not in worst_in:
            p, w = parts[k], 1.0
            for s in probes(p.lo, p.hi, sizes):
                ref = min(timer(i, s) for i in p.pool | {p.best})
                if math.isinf(ref):
                    continue  # nothing runs there
                w = max(w, timer(c, s) / ref)
                if w > cap:
                    break
            worst_in[c, k, cap] = w
        return worst_in[c, k, cap]

    def choose(ks: list[int]) -> tuple[float, float, int] | None:
        lo, hi = parts[ks[0]].lo, parts[ks[-1]].hi
        pool = set().union(*(parts[k].pool | {parts[k].best} for k in ks))
        fits = []
        for c in sorted(pool):
            w = 1.0
            for k in ks:
                w = max(w, worst(c, k))
                if w > TOLERANCE:
                    break
            else:
                fits.append((prefer(c, lo, hi), w, c))
        return min(fits) if fits else None

    def close(ks: list[int], pick: tuple[float, float, int]) -> Range:
        return Range(parts[ks[0]].lo, parts[ks[-1]].hi, pick[2], [parts[k] for k in ks], pick[1])

    def alone(k: int) -> tuple[float, float, int]:
        # a part's own best fails only where the partition gave up refining
        b = parts[k].best
        return choose([k]) or (prefer(b, parts[k].lo, parts[k].hi), worst(b, k, math.inf), b)

    out: list[Range] = []
    group, pick = [0], alone(0)
    for k in range(1, len(parts)):
        trial = choose(group + [k])
        # a join may not leave more sizes unrunnable than two files would
        if trial is not None and trial[0] <= pick[0] + alone(k)[0]:
            group, pick = group + [k], trial
            continue
        out.append(close(group, pick))
        group, pick = [k], alone(k)
    out.append(close(group, pick))
    return out
