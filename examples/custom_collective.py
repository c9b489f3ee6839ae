"""Define a new collective, write a program for it, check it, and run it.

The collective is *neighbor sum*: every rank ends with its own input plus the
input of the rank before it on a ring (out[r] = in[r] + in[r-1]). MSCCL has no
such collective, so we describe it ourselves: a precondition (what each rank's
buffers hold before the call) and a postcondition (what they must hold after).

The script then

1. writes the program with a deliberate mistake (a copy over a link the ring
   does not have) and shows the error pointing at the offending source line;
2. writes it with a logic mistake (the wrong neighbour): ``Check()`` says
   which output chunk is wrong;
3. writes it correctly, compiles it to MSCCL XML, verifies the XML against
   the same postcondition, and runs it on 4 CPU processes.

Run: ``python examples/custom_collective.py``
"""

import numpy as np

from msccl_py import MscclError
from msccl_py.language import *
from msccl_py.language.collectives import Collective
from msccl_py.runtime import shm
from msccl_py.topologies import ring
from msccl_py.verify import verify
from msccl_py.targets.msccl import summary


class NeighborSum(Collective):
    """out[r][0] = in[r][0] + in[r-1][0], one chunk per rank."""

    name = "custom"   # MSCCL XML spells every user-defined collective "custom"

    def init_buffers(self):
        # Precondition: input chunk 0 of rank r holds Chunk(r, 0); outputs start empty.
        return [{Buffer.input: [Chunk(r, 0)], Buffer.output: [None]}
                for r in range(self.num_ranks)]

    def check(self, prog):
        # Postcondition: report (to stderr) every wrong output slot, then return False.
        n, ok = self.num_ranks, True
        for r in range(n):
            want = ReduceChunk(-1, [Chunk(r, 0), Chunk((r - 1) % n, 0)])
            got = prog.buffers[r][Buffer.output][0]
            if got != want:
                self.report(r, Buffer.output, 0, want, got)
                ok = False
        return ok


N = 4                      # ranks
TOPOLOGY = ring(N)         # rank r links only to r-1 and r+1


def neighbor_sum(neighbour_offset: int) -> tuple[MSCCLProgram, bool]:
    """The program and its Check(); ``neighbour_offset``: whose input is added (-1 is right)."""
    with MSCCLProgram("neighbor_sum", TOPOLOGY, NeighborSum(N, 1, False), 1) as prog:
        for r in range(N):
            mine = chunk(r, Buffer.input, 0).copy(r, Buffer.output, 0)   # local copy
            mine.reduce(chunk((r + neighbour_offset) % N, Buffer.input, 0))  # add neighbour's
        ok = Check()
    return prog, ok


print("1. a neighbour two hops away: the ring has no such link")
try:
    neighbor_sum(-2)
except MscclError as exc:          # a LinkError, located at the reduce() line above
    print(f"   {type(exc).__name__}: {exc}")

print("2. the wrong neighbour (r+1 instead of r-1): Check() lists the wrong slots")
wrong, ok = neighbor_sum(+1)
print(f"   Check() -> {ok}")
print("   " + "\n   ".join(wrong.check_report))   # what Check() found, also said on stderr
# The verifier finds the same mistake from the lowered program (or its XML) alone.
print(f"   verify: {verify(wrong.lower(), target='msccl', postcondition=NeighborSum(N, 1, False))}")

print("3. the right neighbour")
prog, ok = neighbor_sum(-1)
print(f"   Check() -> {ok}")

xml = prog.generate_xml("msccl")   # what XML() prints; only msccl runs custom collectives
alg = prog.lower()                 # the same algorithm as msccl_py.targets.msccl.read_xml(xml)
print(f"   XML: {len(xml.splitlines())} lines; first: {xml.splitlines()[0][:60]}...")
print("   " + summary(alg).replace("\n", "\n   "))

# The verifier runs the XML with the runtimes' semantics. A custom collective has
# no built-in postcondition: pass the collective so the data is checked too.
verdict = verify(alg, target="msccl", postcondition=NeighborSum(N, 1, False))
print(f"   verify: {verdict}")

# Run it for real: 4 OS processes, shared-memory FIFOs, MSCCL's semantics.
inputs = [np.full(6, 10.0 ** r) for r in range(N)]     # rank r holds 10**r
outputs = shm.run(alg, inputs)
for r, out in enumerate(outputs):
    want = inputs[r] + inputs[(r - 1) % N]
    print(f"   rank {r}: {out[0]:g} (expected {want[0]:g}) "
          f"{'ok' if np.array_equal(out, want) else 'WRONG'}")
