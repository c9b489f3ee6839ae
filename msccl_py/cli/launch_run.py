"""``msccl-py run`` started by mpirun or torchrun: this process is one rank of the launch.

Every rank draws the same random inputs (same seed), runs its own share of
the algorithm through the joined communicator (:func:`msccl_py.init`: shared
memory within a host, the launch's engine between hosts), and checks its own
output against the expected result; the wrong-element counts are summed over
the ranks, so every rank knows the verdict and exits with the same status.
Rank 0 prints the run line (its own timing) and what crossed hosts.
"""

from __future__ import annotations

import numpy as np

from msccl_py.errors import MscclRuntimeError

#: bytes of the first mismatch's description each rank contributes
_TEXT = 512


class JoinedRun:
    """One rank of a launch running ``run``'s calls (see the module docstring)."""

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.world_size = comm.rank, comm.world_size
        #: FIFO transfers and bytes this rank's algorithm calls sent to other hosts
        self.moved = np.zeros(2, dtype=np.int64)

    @property
    def prints(self) -> bool:
        return self.rank == 0

    def fn(self, alg, inputs: list[np.ndarray], op: str = "sum", inplace: bool = False
           ) -> list:
        """This rank's call: its output at its index, None elsewhere."""
        from msccl_py.plan.tables import plan_for
        from msccl_py.runtime.reference import poison
        from msccl_py.runtime.shm import placement
        if alg.ngpus != self.world_size:
            raise MscclRuntimeError(f"{alg.name} has {alg.ngpus} ranks but the launch has "
                                    f"{self.world_size}: start {alg.ngpus} processes")
        r = self.rank
        mine = inputs[r]
        chunks = tuple(int(c) for c in plan_for(alg).call_chunks[r])
        S = mine.size // chunks[0] if chunks[0] else 0
        (ir_, io), (or_, oo) = placement(chunks, r, S, inplace)
        i_el, o_el, s_el = (c * S for c in chunks)
        size = [0, 0]
        size[ir_] = max(size[ir_], io + i_el)
        size[or_] = max(size[or_], oo + o_el)
        regions = [np.full(n, poison(mine.dtype), dtype=mine.dtype) for n in size]
        regions[ir_][io:io + i_el] = mine
        out = regions[or_][oo:oo + o_el]
        scratch = np.full(s_el, poison(mine.dtype), dtype=mine.dtype)
        before = self.comm.transport_stats()
        self.comm.run(alg, [regions[ir_][io:io + i_el], out, scratch], S, op)
        after = self.comm.transport_stats()
        self.moved += np.array([after["transfers"] - before["transfers"],
                                after["bytes"] - before["bytes"]], dtype=np.int64)
        outs: list = [None] * self.world_size
        outs[r] = out.copy()
        return outs

    def check(self, count_wrong, outs: list, want: list, masks=None) -> tuple[int, str | None]:
        """``count_wrong`` on this rank's output, summed over the launch; the first mismatch
        of the lowest rank that has one."""
        r = self.rank
        mine = [w if k == r else None for k, w in enumerate(want)]
        wrong, first = count_wrong(outs, mine, masks)
        text = np.zeros(_TEXT, dtype=np.uint8)
        raw = (first or "").encode("utf-8", "replace")[:_TEXT]
        text[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        counts = self.comm.all_gather(np.array([wrong], dtype=np.int64))
        texts = self.comm.all_gather(text).reshape(self.world_size, _TEXT)
        total = int(counts.sum())
        for k in range(self.world_size):
            if counts[k]:
                return total, bytes(texts[k]).rstrip(b"\0").decode("utf-8", "replace")
        return total, None

    def crossed(self) -> str | None:
        """What the algorithm's calls sent between hosts (summed over ranks; the result checks
        travel too but are not counted), for rank 0's last line."""
        engine = self.comm.transport_stats()["engine"]
        if engine is None:
            return None
        tot = self.comm.all_reduce(self.moved)
        return (f"between hosts ({self.comm.layout.describe()}): {int(tot[0])} FIFO transfers, "
                f"{int(tot[1])} bytes over {engine}")


def joined_runner(args) -> JoinedRun | None:
    """A :class:`JoinedRun` when this process was started by a launcher, else None."""
    from msccl_py.comm.launch_env import detect
    env = detect()
    if env is None:
        return None
    if args.backend not in ("reference", "shm"):
        raise MscclRuntimeError(f"under a launch ({env.kind}), run uses the launch's ranks on "
                                f"the shm runtime; --backend {args.backend} does not apply")
    from msccl_py.comm.join import init
    return JoinedRun(init())
