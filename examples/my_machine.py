"""From ``nvidia-smi topo -m`` to a program that fits the machine.

1. Read the machine: live ``nvidia-smi topo -m`` when it runs here, else the
   file given on the command line, else the DGX-1 sample shipped in
   ``examples/data/`` (8 V100s in a hybrid cube-mesh: each GPU has NVLinks
   to only 4 of the other 7).
2. Build an NVLink-only topology (PCIe paths left out), so a program that
   crosses PCIe is refused at the line that does it.
3. Compile a ring allreduce in rank order 0, 1, ..., n-1: on the DGX-1 the
   hop 3 -> 4 has no NVLink and the compiler says so (a LinkError naming the
   source line).
4. Find a ring that uses only NVLinks, compile that one, check and verify it.

Run: ``python examples/my_machine.py [NVIDIA_SMI_OUTPUT.txt]``
"""

import shutil
import subprocess
import sys
from pathlib import Path

from msccl_py import LinkError
from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.topologies import read_nvidia_smi
from msccl_py.verify import verify
from msccl_py.targets.msccl import summary

SAMPLE = Path(__file__).resolve().parent / "data" / "dgx1-v100-nvidia-smi.txt"


def machine_text() -> tuple[str, str]:
    """(``nvidia-smi topo -m`` output, where it came from)."""
    if len(sys.argv) > 1:
        return Path(sys.argv[1]).read_text(), sys.argv[1]
    exe = shutil.which("nvidia-smi")
    if exe:
        done = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and "GPU0" in done.stdout:
            return done.stdout, "live nvidia-smi topo -m"
    return SAMPLE.read_text(), f"sample {SAMPLE.name} (no nvidia-smi here)"


def ring_allreduce(topo, order: list[int], name: str) -> tuple[MSCCLProgram, bool]:
    """Ring allreduce visiting ranks in ``order`` (chunk k starts at order[k]), and Check()."""
    n = len(order)
    with MSCCLProgram(name, topo, AllReduce(n, n, True), 1) as prog:
        for step in range(n - 1):
            for k in range(n):
                src, dst = order[(k + step) % n], order[(k + step + 1) % n]
                chunk(dst, Buffer.input, k).reduce(chunk(src, Buffer.input, k))
        for step in range(n - 1):
            for k in range(n):
                src, dst = order[(k + step - 1) % n], order[(k + step) % n]
                chunk(src, Buffer.input, k).copy(dst, Buffer.input, k)
        ok = Check()
    return prog, ok


def nvlink_ring(topo) -> list[int] | None:
    """A cycle through every GPU over existing links (depth-first search), or None."""
    n = topo.num_nodes()

    def extend(path):
        if len(path) == n:
            return path if topo.link(path[-1], path[0]) else None
        for nxt in range(n):
            if nxt not in path and topo.link(path[-1], nxt):
                found = extend(path + [nxt])
                if found:
                    return found
        return None

    return extend([0])


text, source = machine_text()
topo = read_nvidia_smi(text, name="my-machine", include_pcie=False)
n = topo.num_nodes()
print(f"machine: {source}: {n} GPUs")
print("NVLinks between GPUs (row: from, column: to):")
print("      " + " ".join(f"GPU{j}" for j in range(n)))
for i in range(n):
    print(f"GPU{i}  " + " ".join(f"{topo.link(i, j) or '-':>4}" for j in range(n)))

print(f"\nring in rank order {list(range(n))}:")
try:
    ring_allreduce(topo, list(range(n)), "ring_rank_order")
    print("  compiles: every hop has an NVLink on this machine")
except LinkError as exc:
    print(f"  LinkError: {exc}")

order = nvlink_ring(topo)
if order is None:
    print("no ring over NVLinks exists on this machine; use the PCIe topology "
          "(read_nvidia_smi(text)) instead")
    sys.exit(0)
print(f"\nring over NVLinks only {order}:")
prog, ok = ring_allreduce(topo, order, "ring_nvlink")
alg = prog.lower()
print(f"  Check() -> {ok}")
print("  " + summary(alg).splitlines()[0])
print(f"  verify: {verify(alg)}")
