"""Topologies: machines as files, graphs and pictures.

``from msccl_py.topologies import *`` gives MSCCLang's names (``Topology``,
``fully_connected``, ``ring``, ``line``, ``star``, ``hub_and_spoke``,
``dgx1``, ``dgx_a100``, ``nvlink_only``, ``reverse_topology``,
``binarize_topology``, ...) plus :func:`load`, :func:`resolve` and
:func:`read_nvidia_smi`. lark is imported only when a file or nvidia-smi
output is parsed.

>>> load("dgx-h100", nodes=2).num_nodes()
16
"""

from msccl_py.topologies.distributed import distributed_fully_connected, distributed_hub_and_spoke
from msccl_py.topologies.generic import fully_connected, hub_and_spoke, line, ring, star
from msccl_py.topologies.library import available, load, loads, resolve, search_path
from msccl_py.topologies.machines import (amd4, amd8, dgx1, dgx2, dgx_a100, dgx_h100, hgx_h200,
                                          mi250, mi300x, ndv2, ndv4, ndv5)
from msccl_py.topologies.nvidia_smi import nvlink_only, read_nvidia_smi
from msccl_py.topologies.topology import Topology
from msccl_py.topologies.transforms import binarize_topology, reverse_topology

__all__ = [
    "Topology", "fully_connected", "ring", "line", "star", "hub_and_spoke",
    "dgx1", "dgx2", "dgx_a100", "dgx_h100", "hgx_h200", "ndv2", "ndv4", "ndv5",
    "mi250", "mi300x", "amd4", "amd8", "nvlink_only", "read_nvidia_smi",
    "reverse_topology", "binarize_topology", "distributed_fully_connected",
    "distributed_hub_and_spoke", "load", "loads", "resolve", "available", "search_path",
]
