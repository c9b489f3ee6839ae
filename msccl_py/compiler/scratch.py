"""Scratch layout: every named scratch buffer of a rank packed into the one ``s`` buffer."""

from __future__ import annotations


def layout(scratch_sizes: list[dict], instances: int) -> tuple[list[dict], list[int]]:
    """Per rank ``{("s", name): first chunk}`` in creation order, and each rank's total."""
    offsets, totals = [], []
    for sizes in scratch_sizes:
        base, off = {}, 0
        for name, size in sizes.items():
            base[("s", name)] = off
            off += size * instances
        offsets.append(base)
        totals.append(off)
    return offsets, totals
