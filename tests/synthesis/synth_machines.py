"""Machines the synthesis tests build themselves: the shapes the topology files lack.

Tori, rings with chords, boxes joined by slower bridges, switches mixed with
direct links, and a cluster of a small switched box; each as topology-file
text so the tests read them as users would write them.
"""

from __future__ import annotations

from msccl_py.topologies import loads


def torus(rows: int, cols: int, bw: float = 50.0) -> str:
    links = set()
    for r in range(rows):
        for c in range(cols):
            a = r * cols + c
            for b in (r * cols + (c + 1) % cols, ((r + 1) % rows) * cols + c):
                if a != b:
                    links.add((min(a, b), max(a, b)))
    body = " ".join(f"link {a} <-> {b} l" for a, b in sorted(links))
    return (f"machine torus{rows}x{cols} {{ gpus {rows * cols} "
            f"linktype l {bw} GB/s latency 0.7 us {body} }}")


def chord_ring(n: int, step: int, ring_bw: float = 50.0, chord_bw: float = 25.0) -> str:
    ring = " ".join(f"link {i} <-> {(i + 1) % n} r" for i in range(n))
    chords = {(min(i, (i + step) % n), max(i, (i + step) % n)) for i in range(n)}
    body = ring + " " + " ".join(f"link {a} <-> {b} c" for a, b in sorted(chords))
    return (f"machine chords{n}s{step} {{ gpus {n} linktype r {ring_bw} GB/s latency 0.6 us "
            f"linktype c {chord_bw} GB/s latency 0.6 us {body} }}")


def bridged_boxes(boxes: int = 2, size: int = 4, bridges: int = 2) -> str:
    """Fully connected boxes (100 GB/s links) in a line, ``bridges`` 25 GB/s links between
    neighbouring boxes."""
    body = []
    for k in range(boxes):
        ranks = range(k * size, (k + 1) * size)
        body += [f"link {a} <-> {b} nv" for a in ranks for b in ranks if a < b]
    for k in range(boxes - 1):
        for j in range(bridges):
            body.append(f"link {k * size + j} <-> {(k + 1) * size + size - 1 - j} br")
    return (f"machine boxes{boxes}x{size} {{ gpus {boxes * size} "
            f"linktype nv 100 GB/s latency 0.6 us linktype br 25 GB/s latency 1.0 us "
            f"{' '.join(body)} }}")


#: four GPUs on a PCIe-like switch, four on an NVLink ring with chords, joined by links
MIXED = """
machine mixed8 {
  gpus 8
  linktype pc 32 GB/s latency 1.0 us
  linktype nv 25 GB/s latency 0.6 us
  switch pcie gpus 0-3 port pc x1
  link 3 <-> 4 nv  link 4 <-> 5 nv  link 5 <-> 6 nv  link 6 <-> 7 nv  link 7 <-> 4 nv
  link 0 <-> 6 nv  link 1 <-> 7 nv x2
}
"""

#: two boxes of four on one switch each (with a total), joined by slower links
SWITCHED_BOXES = """
machine swboxes {
  gpus 8
  linktype nv 25 GB/s latency 0.6 us
  linktype br 20 GB/s latency 1.0 us
  switch a gpus 0-3 port nv x4 total 250 GB/s
  switch b gpus 4-7 port nv x4
  link 3 <-> 4 br  link 2 <-> 5 br
}
"""

#: a small switched box with one NIC per pair of GPUs, for clusters
NIC_BOX = """
machine nicbox {
  gpus 4
  linktype nv 25 GB/s latency 0.6 us
  switch sw gpus 0-3 port nv x6
  nic ib0 25 GB/s gpus 0-1
  nic ib1 25 GB/s gpus 2-3
}
"""

def irregular(seed: int, gpus: int = 6) -> str:
    """A seeded irregular machine: a ring of links of mixed speeds, random chords (some
    one way), and a switch over a few GPUs; no two GPUs alike."""
    import random
    rng = random.Random(seed)
    kinds = {"a": 25, "b": 50, "c": 100}
    body = [f"link {i} <-> {(i + 1) % gpus} {rng.choice('abc')}" for i in range(gpus)]
    pairs = [(a, b) for a in range(gpus) for b in range(a + 2, gpus) if (a, b) != (0, gpus - 1)]
    for a, b in rng.sample(pairs, 3):
        arrow = rng.choice(["<->", "->"])
        body.append(f"link {a} {arrow} {b} {rng.choice('abc')}")
    members = sorted(rng.sample(range(gpus), 3))
    body.append(f"switch s gpus {' '.join(map(str, members))} port a x{rng.choice([1, 2])}")
    types = " ".join(f"linktype {k} {bw} GB/s latency 0.7 us" for k, bw in kinds.items())
    return f"machine irregular{seed} {{ gpus {gpus} {types} {' '.join(body)} }}"


#: name -> (topology file text, nodes)
TEXTS = {
    "torus2x4": (torus(2, 4), None),
    "torus3x3": (torus(3, 3), None),
    "torus4x4": (torus(4, 4), None),
    "chords8": (chord_ring(8, 4), None),
    "chords12": (chord_ring(12, 6, chord_bw=50.0), None),
    "boxes2x4": (bridged_boxes(2, 4, 2), None),
    "boxes3x4": (bridged_boxes(3, 4, 1), None),
    "mixed8": (MIXED, None),
    "swboxes": (SWITCHED_BOXES, None),
    "nicbox-x3": (NIC_BOX, 3),
    "irregular1": (irregular(1), None),
    "irregular2": (irregular(2), None),
}

HELD_OUT = {name: (lambda text=text, nodes=nodes: loads(text, nodes=nodes))
            for name, (text, nodes) in TEXTS.items()}

_DIR: list[str] = []


def topology_file(name: str) -> tuple[str, int | None]:
    """(path of a .topo file holding held-out machine ``name``, its node count), as a user
    would pass them to ``synthesize`` (its programs load the machine from that file)."""
    import os
    if not _DIR:   # set per session by conftest.py, in pytest's temp folder
        raise RuntimeError("synth_machines._DIR is unset: use the synthesis conftest.py")
    text, nodes = TEXTS[name]
    path = os.path.join(_DIR[0], f"{name}.topo")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    return path, nodes
