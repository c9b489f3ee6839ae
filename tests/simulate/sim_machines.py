"""Machines the simulator tests write themselves."""

from __future__ import annotations

from msccl_py.topologies import loads

#: the issue's uniform machine: 8 GPUs in a ring, 100 GB/s per direction, 0.5 µs, no tb limit
RING8 = """
machine ring8 {
  gpus 8
  linktype l 100 GB/s latency 0.5 us
  link 0 <-> 1 l  link 1 <-> 2 l  link 2 <-> 3 l  link 3 <-> 4 l
  link 4 <-> 5 l  link 5 <-> 6 l  link 6 <-> 7 l  link 7 <-> 0 l
}
"""


def ring_machine(n: int = 8, bw: float = 100.0, latency_us: float = 0.5):
    """Topology of ``n`` GPUs in a ring of ``bw`` GB/s, ``latency_us`` links."""
    links = " ".join(f"link {i} <-> {(i + 1) % n} l" for i in range(n if n > 2 else 1))
    return loads(f"machine ring{n} {{ gpus {n} linktype l {bw} GB/s latency {latency_us} us "
                 f"{links} }}")
