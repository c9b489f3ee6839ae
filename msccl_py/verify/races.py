"""Data-race detection with vector clocks over threadblocks.

Two accesses to one chunk of one rank race when at least one writes, they
come from different threadblocks and nothing orders them. Orderings the
runtimes guarantee: program order in a threadblock, a dependency (the
waiting step comes after the step it names) and a FIFO transfer (a receive
comes after the send that filled the slot). FIFO back-pressure is not
counted: it depends on the message size, so an algorithm that needs it for
correctness is wrong at some size. Each threadblock carries a vector clock;
sends stamp their payload, receives and dependency waits merge clocks.

Only threadblocks that touch a chunk some other threadblock touches can take
part in a race, so the clocks need a column for those alone (``blocks``); the
caller reports only the accesses to such shared chunks. Most compiled
programs share none, and then no detector is needed at all.

>>> import numpy as np
>>> from msccl_py.verify.samples import ring_allgather
>>> from msccl_py.plan.tables import build_plan
>>> d = RaceDetector(build_plan(ring_allgather(2)))   # row 2: the copy, row 0: the send
>>> d.begin(2); d.write(2, ("o", 0)); d.complete(2)
>>> d.begin(0); d.read(0, ("o", 0)); d.race is None   # the send depends on the copy
True
>>> d = RaceDetector(build_plan(ring_allgather(2)))   # the send skips its wait
>>> d.begin(0); d.read(0, ("o", 0)); d.begin(2); d.write(2, ("o", 0)); d.race[3]
'read/write'
"""

from __future__ import annotations

import numpy as np

from msccl_py.plan.tables import (
    B_RANK,
    B_TB,
    D_STEP,
    OP_NAMES,
    S_BLOCK,
    S_DEP_BEGIN,
    S_HAS_DEP,
    S_INDEX,
    S_NDEPS,
    S_OP,
    Plan,
)

#: above this many clock entries (threadblocks x tracked threadblocks) detection is skipped
MAX_CLOCK_CELLS = 4096 * 4096


class RaceDetector:
    """Vector clocks per threadblock; ``race`` holds the first race found (or None).

    ``blocks`` are the threadblocks whose accesses are checked (default: all).
    """

    def __init__(self, plan: Plan, blocks=None):
        self.plan = plan
        nb = plan.nblocks
        tracked = range(nb) if blocks is None else sorted(blocks)
        #: column of each tracked threadblock in every clock (-1: not tracked)
        self.col = [-1] * nb
        for i, b in enumerate(tracked):
            self.col[b] = i
        self.clock = np.zeros((nb, len(tracked)), dtype=np.int32)
        dstep = plan.deps[:, D_STEP].tolist() if len(plan.deps) else []
        self.block = plan.step_column(S_BLOCK)
        self.has_dep = [h != 0 for h in plan.step_column(S_HAS_DEP)]
        #: per step row, the step rows it waits for
        self.deps: list = [()] * plan.nsteps
        begin, nd = plan.step_column(S_DEP_BEGIN), plan.step_column(S_NDEPS)
        for g in np.flatnonzero(plan.steps[:, S_NDEPS]).tolist():
            self.deps[g] = [t for t in dstep[begin[g]:begin[g] + nd[g]] if t >= 0]
        self.current = [-1] * nb
        self.flag_clock: dict[int, np.ndarray] = {}
        self.last_write: dict = {}
        self.reads: dict = {}
        self.race: tuple | None = None

    def begin(self, g: int) -> None:
        """Step row ``g`` starts: tick its threadblock and merge the clocks it waited for."""
        b = self.block[g]
        if self.current[b] == g:
            return
        self.current[b] = g
        c = self.clock[b]
        k = self.col[b]
        if k >= 0:
            c[k] += 1
        for t in self.deps[g]:
            v = self.flag_clock.get(t)
            if v is not None:
                np.maximum(c, v, out=c)

    def stamp(self, g: int) -> np.ndarray:
        """The clock a send from step row ``g`` carries."""
        return self.clock[self.block[g]].copy()

    def receive(self, g: int, stamp: np.ndarray | None) -> None:
        """Step row ``g`` took a payload sent with clock ``stamp``."""
        if stamp is not None:
            c = self.clock[self.block[g]]
            np.maximum(c, stamp, out=c)

    def complete(self, g: int) -> None:
        """Step row ``g`` finished; remember its clock if it publishes a flag."""
        self.begin(g)
        if self.has_dep[g]:
            self.flag_clock[g] = self.clock[self.block[g]].copy()

    def _check(self, g: int, other: tuple, what: str, key) -> None:
        b = self.block[g]
        ob, count, og = other
        if self.race is None and ob != b and self.clock[b, self.col[ob]] < count:
            self.race = (key, og, g, what)

    def read(self, g: int, key) -> None:
        w = self.last_write.get(key)
        if w is not None:
            self._check(g, w, "write/read", key)
        b = self.block[g]
        self.reads.setdefault(key, []).append((b, int(self.clock[b, self.col[b]]), g))

    def write(self, g: int, key) -> None:
        w = self.last_write.get(key)
        if w is not None:
            self._check(g, w, "write/write", key)
        for r in self.reads.pop(key, ()):
            self._check(g, r, "read/write", key)
        b = self.block[g]
        self.last_write[key] = (b, int(self.clock[b, self.col[b]]), g)

    def describe(self, where: str) -> str:
        """The first race as a sentence; ``where`` names the chunk."""
        _key, first, second, what = self.race
        p = self.plan

        def step(g: int) -> str:
            blk = p.blocks[p.steps[g, S_BLOCK]]
            return f"tb {blk[B_TB]} step {p.steps[g, S_INDEX]} ({OP_NAMES[p.steps[g, S_OP]]})"

        rank = p.blocks[p.steps[first, S_BLOCK], B_RANK]
        a, b = what.split("/")
        return (f"data race on rank {rank} {where}: {step(first)} {a}s it and {step(second)} "
                f"{b}s it with no dependency or transfer ordering them")
