"""The tuner's table: what won where, by how much, which calls each file serves, how to load it.

Per call kind, one row per sample size: the range's candidate, its time,
the fastest other candidate and the ratio of their times ("margin"; below
1.00x where a near-tie was merged into a neighbour's range), and NCCL's own
choice over it ("vs nccl": ``simulate nccl``'s time of what NCCL itself runs
there over the winner's; below 1.00x NCCL is faster, and a note says so). Then the files: their ``minBytes``/``maxBytes``,
the calls they serve, the sizes their chunk count takes, and how far from
the best they are anywhere in their range.
"""

from __future__ import annotations

import math

from msccl_py.tuning import selection

_RULE_TEXT = {
    True: "a file runs a call of n bytes when minBytes <= n < maxBytes, its inplace flag matches "
          "the call and the call's count divides by its nchunksperloop; other calls run NCCL",
    False: "a file runs a call of n bytes when minBytes <= n <= maxBytes, it declares the call's "
           "kind (inplace/outofplace) and the call's element count divides by its "
           "nchunksperloop; other calls run NCCL",
}


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def _span(lo: int, hi: int | None) -> str:
    return f"{_bytes(lo)}..{'inf' if hi is None else _bytes(hi)}"


def _rows(result, ranges) -> list[str]:
    labels = [c.label for c in result.candidates]
    rows = [f"{'sizes':<26} {'winner':<40} {'time us':>10} {'fastest other':<40} {'margin':>7} "
            f"{'vs nccl':>8}"]
    for r in ranges:
        shown = [s for s in r.samples if s in result.sizes]
        if not shown:
            rows.append(f"{_span(r.lo, r.hi):<26} {labels[r.winner]:<40} {'-':>10} "
                        "(between samples)")
        for s in shown:
            j = result.sizes.index(s)
            column = [t[j] for t in result.times]
            win = column[r.winner]
            others = sorted((t, i) for i, t in enumerate(column) if i != r.winner)
            runner = others[0] if others and not math.isinf(others[0][0]) else None
            margin = f"{runner[0] / win:.2f}x" if runner else "-"
            nccl_us = getattr(result, "nccl_us", None)
            vs = f"{nccl_us[j] / win:.2f}x" if nccl_us else "-"
            rows.append(f"{_span(r.lo, r.hi) + ' @' + _bytes(s):<26} {labels[r.winner]:<40} "
                        f"{win:>10.2f} {labels[runner[1]] if runner else '-':<40} {margin:>7} "
                        f"{vs:>8}")
    return rows


def _powers(f) -> str:
    runs, calls = f.powers
    if runs == calls:
        return ""
    whole = f"the {calls} powers of two" if calls > 1 else "the power of two"
    return f" ({'none' if not runs else runs} of {whole} in its range)"


def load_line(result) -> str:
    """How to point the runtime at the files."""
    if result.target == "msccl":
        return "MSCCL_XML_FILES=" + ":".join(str(f.path) for f in result.load_order)
    return f"MSCCL_ALGO_DIR={result.out_dir}"


def table(result) -> str:
    """The tuner's report for ``result`` (a :class:`~msccl_py.tuning.tune.TuneResult`)."""
    rule = selection.rule(result.target)
    out = [f"target {result.target}: {_RULE_TEXT[rule.half_open]} ({rule.source})"]
    shown: dict[tuple, list[str]] = {}
    for kind, ranges in result.tilings.items():
        shown.setdefault(tuple((r.lo, r.hi, r.winner) for r in ranges), []).append(kind)
    for kinds in shown.values():
        out += ["", f"{' and '.join(kinds)} calls:"] + _rows(result, result.tilings[kinds[0]])
    out += ["", f"files ({load_line(result)}):"]
    for f in result.files:
        out.append(f"  {f.path.name}: minBytes={f.min_bytes} maxBytes={f.max_bytes} "
                   f"({_span(f.lo, f.hi)}); {' and '.join(f.kinds)} calls; runs {result.dtype} "
                   f"sizes that are multiples of {f.granule} B{_powers(f)}; within "
                   f"{(f.worst - 1) * 100:.1f}% of the best in its range")
    out += [f"note: {n}" for n in result.notes]
    return "\n".join(out)
