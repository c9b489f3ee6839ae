"""Verification results: findings, per-regime deadlock results and the verdict.

>>> v = Verdict("ok", "allreduce postcondition holds", regimes={})
>>> v.ok, str(v)
(True, 'ok: allreduce postcondition holds')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msccl_py.errors import VerificationError
from msccl_py.plan.findings import Finding, Waiter

STATUSES = ("ok", "incorrect", "deadlock", "invalid")


@dataclass
class RegimeResult:
    """Deadlock model outcome in one message-size regime.

    ``reachable`` says whether the algorithm's [min_bytes, max_bytes] range
    includes sizes of this regime; ``cycle`` is the minimal wait cycle when it
    deadlocks (or the blocked chain ending at a finished/missing peer).
    """

    name: str
    deadlock_free: bool
    iterations: int
    max_allowed_count: int
    fifo_transfers: int
    reachable: bool = True
    cycle: list[Waiter] = field(default_factory=list)
    blocked: int = 0

    def describe(self) -> str:
        head = (f"{self.name} messages ({self.iterations} iteration"
                f"{'s' if self.iterations != 1 else ''}, {self.max_allowed_count} chunk"
                f"{'s' if self.max_allowed_count != 1 else ''}/transfer, FIFO "
                f"{self.fifo_transfers} transfers)")
        if not self.reachable:
            head += " [outside the algorithm's size range]"
        if self.deadlock_free:
            return f"{head}: deadlock-free"
        return f"{head}: DEADLOCK, {self.blocked} threadblocks stuck: " + "; ".join(
            str(w) for w in self.cycle)


@dataclass
class Verdict:
    """What :func:`msccl_py.verify.verify` concluded.

    ``status`` is ``ok``, ``incorrect``, ``deadlock`` or ``invalid``; ``reason``
    the one-line explanation; ``errors`` every finding; ``regimes`` maps
    ``small``/``large`` (or ``call`` for one given size) to its result.
    """

    status: str
    reason: str
    regimes: dict[str, RegimeResult] = field(default_factory=dict)
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}"

    def report(self) -> str:
        """The verdict line, then one line per regime and per further finding."""
        lines = [str(self)]
        lines += [f"  {r.describe()}" for r in self.regimes.values()]
        lines += [f"  error: {e}" for e in self.errors[1:20]]
        if len(self.errors) > 20:
            lines.append(f"  ... {len(self.errors) - 20} more errors")
        lines += [f"  warning: {w}" for w in self.warnings[:10]]
        return "\n".join(lines)

    def raise_for_status(self) -> None:
        """Raise :class:`VerificationError` unless the verdict is ``ok``."""
        if not self.ok:
            raise VerificationError(str(self))
