"""Minimax (Chebyshev) fits with bounds: the largest residual made as small as it goes.

Calibration is judged by its worst row (issue 33: every size within 15% from
64 KiB, 30% below), so a fit that minimises a mean can leave one row outside
while its neighbours leave room. :func:`minimax` solves the linear problem
(Lawson's reweighted least squares, each weighted solve kept inside the
bounds); :func:`refine` the non-linear one by linearising it around the
current point (finite differences), taking the linear problem's step inside a
trust region, and keeping it only where the true worst residual falls.

>>> a = np.array([[1.0], [1.0], [1.0]])
>>> round(float(minimax(a, np.array([10.0, 12.0, 20.0]))[0]), 3)
15.0
>>> round(float(minimax(a, np.array([10.0, 12.0, 20.0]), hi=np.array([13.0]))[0]), 3)
13.0
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def bounded_lsq(a: np.ndarray, b: np.ndarray, lo: np.ndarray | None = None,
                hi: np.ndarray | None = None) -> np.ndarray:
    """Least squares ``a @ x ~ b`` with ``lo <= x <= hi`` (None: unbounded): the coefficient
    furthest outside its bounds is fixed at the bound and the rest refitted, until none is."""
    n = a.shape[1]
    lo = np.full(n, -np.inf) if lo is None else np.asarray(lo, dtype=float)
    hi = np.full(n, np.inf) if hi is None else np.asarray(hi, dtype=float)
    x = np.zeros(n)
    fixed = np.zeros(n, dtype=bool)
    for _ in range(n + 1):
        free = ~fixed
        if free.any():
            rhs = b - a[:, fixed] @ x[fixed]
            x[free] = np.linalg.lstsq(a[:, free], rhs, rcond=None)[0]
        out = np.where(free, np.maximum(lo - x, x - hi), -np.inf)
        if not free.any() or out.max() <= 1e-12:
            return np.clip(x, lo, hi)
        k = int(np.argmax(out))
        x[k] = min(max(x[k], lo[k]), hi[k])
        fixed[k] = True
    return np.clip(x, lo, hi)


def minimax(a: np.ndarray, b: np.ndarray, lo: np.ndarray | None = None,
            hi: np.ndarray | None = None, iterations: int = 200) -> np.ndarray:
    """Coefficients within ``[lo, hi]`` minimising the largest ``|a @ x - b|`` (Lawson's
    algorithm: least squares reweighted towards the rows left furthest off)."""
    w = np.full(len(b), 1.0 / len(b))
    x = np.zeros(a.shape[1])
    best, best_x = np.inf, x
    for _ in range(iterations):
        sw = np.sqrt(w)
        x = bounded_lsq(a * sw[:, None], b * sw, lo, hi)
        r = np.abs(a @ x - b)
        if r.max() < best:
            best, best_x = float(r.max()), x
        if not r.any() or not (w * r).sum():
            break
        w = w * r / (w * r).sum()
    return best_x


def refine(residuals: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lo: np.ndarray,
           hi: np.ndarray, steps: np.ndarray, target: float = 1.0, keep: float = 1e-3,
           move: float = 3e-4, rounds: int = 20, stiff: np.ndarray | None = None) -> np.ndarray:
    """``x`` within ``[lo, hi]`` that brings every ``|residuals(x)|`` to ``target`` or below
    while changing the residuals from ``x0``'s as little as it can: Gauss-Newton on the
    squared excesses over ``target`` plus ``keep`` times the squared changes and ``move``
    squared times the squared parameter changes in ``steps`` (so of parameters that trade
    against each other the nearer stay put; columns by finite differences of ``steps``),
    each step kept inside the bounds and a trust region
    that starts at 8 steps, doubles on success and halves on failure. ``x0`` itself (clipped
    into the bounds) where every residual is already within ``target``."""
    x = start = np.clip(np.asarray(x0, dtype=float), lo, hi)
    pull = move * (np.ones_like(x) if stiff is None else np.asarray(stiff, dtype=float)) / steps
    r0 = r = residuals(x)

    def terms(r: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.concatenate([np.maximum(np.abs(r) - target, 0.0), np.sqrt(keep) * (r - r0),
                               pull * (x - start)])
    cost = float((terms(r, x) ** 2).sum())
    region = 8.0 * steps
    for _ in range(rounds):
        if np.abs(r).max() <= target:
            break
        cols = []
        for k, h in enumerate(steps):
            e = np.zeros_like(x)
            e[k] = h if x[k] + h <= hi[k] else -h
            cols.append((residuals(x + e) - r) / e[k])
        jac = np.stack(cols, axis=1)
        out = (np.abs(r) > target)[:, None] * np.sign(r)[:, None] * jac
        d = bounded_lsq(np.vstack([out, np.sqrt(keep) * jac, np.diag(pull)]),
                        -terms(r, x), np.maximum(lo - x, -region), np.minimum(hi - x, region))
        got = residuals(x + d)
        now = float((terms(got, x + d) ** 2).sum())
        if now < cost * (1 - 1e-9):
            x, r, cost = x + d, got, now
            region = np.minimum(region * 2, hi - lo)
        else:
            region = region / 2
            if np.all(region < steps / 8):
                break
    return x


def within(residuals: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lo: np.ndarray,
           hi: np.ndarray, ratio: np.ndarray, target: float,
           kept: float, stiff: np.ndarray | None = None) -> tuple[np.ndarray | None, float]:
    """:func:`refine` with the parameters marked in ``ratio`` searched on a log scale (their
    bounds as values; steps of 1% there, 0.5 elsewhere): the refined ``x`` and its largest
    residual, or None where ``x0`` is outside the bounds or the refinement leaves a residual
    above ``kept`` (a pull towards a row no parameters reach only spoils the others)."""
    ratio = np.asarray(ratio, dtype=bool)
    given = np.asarray(x0, dtype=float)
    x0, lo, hi = (np.where(ratio, np.log(np.maximum(v, 1e-300)), v) for v in (given, lo, hi))
    if np.any(~ratio & ((x0 < lo) | (x0 > hi))):
        return None, float(np.abs(residuals(given)).max())      # values, not their logs

    def back(x: np.ndarray) -> np.ndarray:
        return np.where(ratio, np.exp(x), x)
    x = refine(lambda x: residuals(back(x)), x0, lo, hi, np.where(ratio, 0.01, 0.5), target,
               stiff=stiff)
    worst = float(np.abs(residuals(back(x))).max())
    return (back(x) if worst <= kept else None), worst
