"""What the plan-level checks report: a finding, and one link of a wait cycle.

They live below ``verify`` and ``runtime`` because both report them.

>>> str(Finding("static", "no steps", rank=0, tb=1))
'rank 0 tb 1: no steps'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One problem: its kind (``static``, ``connection``, ``data``, ``deadlock``), the text,
    and where (rank, threadblock id, IR step index; ``None`` when not tied to one)."""

    kind: str
    message: str
    rank: int | None = None
    tb: int | None = None
    step: int | None = None

    def __str__(self) -> str:
        where = []
        if self.rank is not None:
            where.append(f"rank {self.rank}")
        if self.tb is not None:
            where.append(f"tb {self.tb}")
        if self.step is not None:
            where.append(f"step {self.step}")
        return f"{' '.join(where)}: {self.message}" if where else self.message


@dataclass(frozen=True)
class Waiter:
    """One link of a wait cycle: a threadblock blocked on something held by the next."""

    rank: int
    tb: int
    step: int
    op: str
    iteration: int
    waits_for: str

    def __str__(self) -> str:
        return (f"rank {self.rank} tb {self.tb} step {self.step} ({self.op}, iteration "
                f"{self.iteration}) waits for {self.waits_for}")
