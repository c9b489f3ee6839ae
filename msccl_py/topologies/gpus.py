"""GPU models: the datasheet link speeds that turn ``nvidia-smi topo -m`` into bandwidths.

nvidia-smi names the links between GPUs (``NV#``: # NVLinks; ``PIX``/``PXB``/
``PHB``/``NODE``/``SYS``: PCIe paths) but not their speed, which depends on the
GPU. Each :class:`GpuModel` gives, from its vendor datasheet, the bandwidth of
one NVLink and of the GPU's PCIe interface per direction (the datasheets
quote both directions together, so half of that), and the compute
capability, which decides the NCCL constants :mod:`msccl_py.topologies.rings`
and :mod:`msccl_py.tuning.nccl` use. ``machine`` names the machine file
whose performance-model figures (``threadblock``, ``memory``, ``protocol``)
hold for the model's usual 8-GPU board.

>>> gpu_model("NVIDIA H100 80GB HBM3").nvlink_GBps, gpu_model("A100-SXM4-80GB").arch
(25.0, 80)
>>> gpu_model("AMD Instinct MI300X") is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from msccl_py.errors import TopologyError


@dataclass(frozen=True)
class GpuModel:
    """One GPU model's link speeds per direction (GB/s) and compute capability.

    ``nvlink_GBps`` is one NVLink (None: no NVLink), ``nvlinks`` how many the
    GPU has, ``pcie_GBps`` its PCIe x16 interface; ``source`` the datasheet.
    """

    name: str
    arch: int
    nvlink_GBps: float | None
    nvlinks: int
    pcie_GBps: float
    source: str
    machine: str | None = None


#: datasheet figures; NVLink totals are per GPU in both directions, so one link per
#: direction is total / links / 2, and PCIe x16 is 32 (Gen3), 64 (Gen4), 128 (Gen5) GB/s
#: both ways
MODELS = (
    GpuModel("P100", 60, 20.0, 4, 16.0, "Tesla P100 datasheet: NVLink 160 GB/s (4 links), "
             "PCIe Gen3 32 GB/s"),
    GpuModel("V100", 70, 25.0, 6, 16.0, "Tesla V100 datasheet: NVLink 300 GB/s (6 links), "
             "PCIe Gen3 32 GB/s", "dgx1"),
    GpuModel("A100", 80, 25.0, 12, 32.0, "A100 datasheet: NVLink 600 GB/s (12 links), "
             "PCIe Gen4 64 GB/s", "dgx-a100"),
    GpuModel("A800", 80, 25.0, 8, 32.0, "A800 datasheet: NVLink 400 GB/s (8 links), "
             "PCIe Gen4 64 GB/s"),
    GpuModel("A40", 86, 14.0625, 4, 32.0, "A40 datasheet: NVLink bridge 112.5 GB/s (4 links), "
             "PCIe Gen4 64 GB/s"),
    GpuModel("RTX A6000", 86, 14.0625, 4, 32.0, "RTX A6000 datasheet: NVLink bridge "
             "112.5 GB/s (4 links), PCIe Gen4 64 GB/s"),
    GpuModel("RTX 3090", 86, 14.0625, 4, 32.0, "GeForce RTX 3090 specifications: NVLink "
             "bridge 112.5 GB/s (4 links), PCIe Gen4"),
    GpuModel("L40S", 89, None, 0, 32.0, "L40S datasheet: PCIe Gen4 x16 64 GB/s, no NVLink"),
    GpuModel("L40", 89, None, 0, 32.0, "L40 datasheet: PCIe Gen4 x16 64 GB/s, no NVLink"),
    GpuModel("L4", 89, None, 0, 32.0, "L4 datasheet: PCIe Gen4 x16 64 GB/s, no NVLink"),
    GpuModel("RTX 4090", 89, None, 0, 32.0, "GeForce RTX 4090 specifications: PCIe Gen4, "
             "no NVLink"),
    GpuModel("H100", 90, 25.0, 18, 64.0, "H100 SXM datasheet: NVLink 900 GB/s (18 links), "
             "PCIe Gen5 128 GB/s", "dgx-h100"),
    GpuModel("H800", 90, 25.0, 8, 64.0, "H800 SXM datasheet: NVLink 400 GB/s (8 links), "
             "PCIe Gen5 128 GB/s"),
    GpuModel("H200", 90, 25.0, 18, 64.0, "H200 SXM datasheet: NVLink 900 GB/s (18 links), "
             "PCIe Gen5 128 GB/s", "hgx-h200"),
    GpuModel("H20", 90, 25.0, 18, 64.0, "H20 datasheet: NVLink 900 GB/s (18 links), "
             "PCIe Gen5 128 GB/s"),
    GpuModel("B200", 100, 50.0, 18, 64.0, "HGX B200 datasheet: NVLink 5 1.8 TB/s per GPU "
             "(18 links), PCIe Gen5 128 GB/s"),
    GpuModel("RTX 5090", 120, None, 0, 64.0, "GeForce RTX 5090 specifications: PCIe Gen5, "
             "no NVLink"),
)


def _key(text: str) -> str:
    # letters and digits apart, so "RTX5090" and "RTX 5090" read alike ("h 100" is still no
    # whole word of "h 1000")
    text = text.lower().replace("nvidia", " ").replace("tesla", " ").replace("geforce", " ")
    text = re.sub(r"(?<=[a-z])(?=[0-9])|(?<=[0-9])(?=[a-z])", " ", text.replace("-", " "))
    return re.sub(r"\s+", " ", text).strip()


def gpu_model(name: str | None) -> GpuModel | None:
    """The model whose name appears in ``name`` as a whole word (``"H100"`` in
    ``"NVIDIA H100 80GB HBM3"`` but not in ``"H1000"``), the longest match; None if none.

    >>> gpu_model("RTX5090").name, gpu_model("NVIDIA H100 80GB HBM3").name, gpu_model("H1000")
    ('RTX 5090', 'H100', None)
    """
    if not name:
        return None
    text = f" {_key(name)} "
    best = None
    for m in MODELS:
        k = _key(m.name)
        if re.search(rf"(?<![a-z0-9]){re.escape(k)}(?![a-z0-9])", text) and (
                best is None or len(k) > len(_key(best.name))):
            best = m
    return best


#: NVLink SHARP (NVLS: reduction and multicast in the NVSwitch) from compute capability 9.0
#: (Hopper's third-generation NVSwitch; NCCL's search skips NVLS below sm90, search.cc)
NVLS_MIN_ARCH = 90


def generation(arch: int | None) -> int:
    """NCCL's GPU generation index (tuning.cc compCapIndex): 0 Volta, 1 Ampere, 2 Hopper,
    3 Blackwell; a GPU without a known model counts as Ampere."""
    if arch is None:
        return 1
    return 3 if arch >= 100 else 2 if arch >= 90 else 1 if arch >= 80 else 0


def nvls_switch(topology) -> dict | None:
    """The NVSwitch that reduces and multicasts for every GPU of a node (NVLink SHARP), as
    the machine's ``model`` (compute capability 9.0 and up) and its ``switch`` say; None
    where the machine has none. Its ``count`` is each GPU's NVLinks into it.

    >>> from msccl_py.topologies import load
    >>> nvls_switch(load("dgx-h100"))["count"], nvls_switch(load("dgx-a100"))
    (18, None)
    """
    model = gpu_model(getattr(topology, "model", None))
    if model is None or model.arch < NVLS_MIN_ARCH:
        return None
    nodes = getattr(topology, "num_machines", 1) or 1
    per_node = topology.num_nodes() // nodes
    for _, d in topology.graph.nodes(data=True):
        if (d.get("kind") == "switch" and str(d.get("link") or "").lower().startswith("nvlink")
                and len(d.get("gpus") or ()) >= per_node >= 2):
            return d
    return None


def first_node(topology):
    """One node of a cluster topology (its node 0: GPUs, switches, NICs), the topology
    itself when it is one node. NCCL's intra-node figures are this node's.

    >>> from msccl_py.topologies import load
    >>> t = first_node(load("dgx-h100", nodes=2))
    >>> t.num_nodes(), t.model, t.num_machines
    (8, 'H100-SXM5', 1)
    """
    from msccl_py.topologies.topology import Topology
    if (getattr(topology, "num_machines", 1) or 1) == 1:
        return topology
    g = topology.graph
    keep = [v for v, d in g.nodes(data=True) if d.get("node") == 0]
    sub = g.subgraph(keep).copy()
    one = Topology.from_graph(f"{topology.machine}", sub, unit_bw=topology.unit_bw
                              if topology.bandwidth_unit == "GB/s" else None,
                              title=topology.title, source=topology.source,
                              machine=topology.machine)
    one.model = topology.model
    one.cpu_vendor = getattr(topology, "cpu_vendor", None)
    return one


def require_gpu_model(name: str) -> GpuModel:
    """:func:`gpu_model`, or a TopologyError listing the models known."""
    model = gpu_model(name)
    if model is None:
        known = ", ".join(m.name for m in MODELS)
        raise TopologyError(f"unknown GPU model {name!r}: no datasheet link speeds for it "
                            f"(known: {known})")
    return model


def read_nvidia_smi_model(text: str, model_name: str, *, name: str = "nvidia-smi",
                          file: str | None = None):
    """Topology of ``nvidia-smi topo -m`` text whose GPUs are ``model_name``: each ``NV#``
    pair gets # of the model's NVLinks; the other pairs talk over PCIe, where each GPU's
    x16 interface is one port shared by all its PCIe peers (a ``pcie`` switch); and the
    model's usual machine file lends its performance-model figures (threadblock, memory,
    protocols).

    >>> t = read_nvidia_smi_model("  GPU0 GPU1\\nGPU0 X NV4\\nGPU1 NV4 X\\n", "H100")
    >>> t.bandwidth(0, 1), t.model, t.graph.graph["threadblock_bw"]
    (100.0, 'H100', 30.9)
    """
    from msccl_py.topologies.library import find, read_specs
    from msccl_py.topologies.nvidia_smi import read_nvidia_smi
    model = require_gpu_model(model_name)
    topo = read_nvidia_smi(text, name=name, file=file, nvlink_bw=model.nvlink_GBps or 0.0,
                           pcie_bw=model.pcie_GBps)
    if model.nvlink_GBps is None and any(
            kind == "nvlink" for *_, kind in topo.graph.edges(data="kind")):
        raise TopologyError(f"the nvidia-smi output shows NVLinks, but a {model.name} has none "
                            f"({model.source}); check --gpu-model", file)
    _shared_pcie(topo.graph, model.pcie_GBps)
    topo.model = model.name
    if model.machine:
        spec = read_specs(find(model.machine))[model.machine]
        topo.graph.graph.update(threadblock_bw=spec.threadblock_bw, memory_bw=spec.memory_bw,
                                protocols=dict(spec.protocols),
                                protocol_threadblock=dict(spec.protocol_threadblock))
    return topo


def _shared_pcie(graph, port_bw: float) -> None:
    """Route the PCIe pairs through one switch whose port per GPU is its x16 interface."""
    pairs = [(a, b) for a, b, kind in graph.edges(data="kind") if kind == "pcie"]
    if not pairs:
        return
    gpus = sorted({r for pair in pairs for r in pair})
    graph.add_node("pcie", kind="switch", node=0, gpus=gpus, count=1, link="pcie",
                   port_bw=port_bw, total_bw=None)
    for a, b in pairs:
        graph.edges[a, b]["via"] = "pcie"
    for r in gpus:
        graph.add_edge(r, "pcie", kind="attach")
        graph.add_edge("pcie", r, kind="attach")
