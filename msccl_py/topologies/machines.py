"""Named machine builders, each loading its file from ``topologies/``.

The files are the one source of truth; these functions exist so MSCCLang
programs (``dgx1()``, ``dgx_a100()``, ``amd4()``, ...) keep working.
"""

from __future__ import annotations

from msccl_py.topologies.library import load
from msccl_py.topologies.topology import Topology


def dgx1() -> Topology:
    """DGX-1 (8x V100, hybrid cube-mesh); ``links`` counts NVLinks.

    >>> dgx1().link(0, 1), dgx1().link(0, 5)
    (2, 0)
    """
    return load("dgx1")


def dgx2() -> Topology:
    """DGX-2 (16x V100 on NVSwitch, 6 NVLinks per GPU)."""
    return load("dgx2")


def dgx_a100() -> Topology:
    """DGX A100 (8x A100 on NVSwitch, 12 NVLinks per GPU).

    >>> dgx_a100().link(3, 7)
    12
    """
    return load("dgx-a100")


def dgx_h100() -> Topology:
    """DGX H100 (8x H100 on NVSwitch, 18 NVLinks per GPU)."""
    return load("dgx-h100")


def hgx_h200() -> Topology:
    """HGX H200 8-GPU (18 NVLinks per GPU, as H100)."""
    return load("hgx-h200")


def ndv2() -> Topology:
    """Azure NDv2: DGX-1 links, one EDR NIC shared by all 8 GPUs."""
    return load("ndv2")


def ndv4() -> Topology:
    """Azure NDv4 (ND A100 v4)."""
    return load("ndv4")


def ndv5() -> Topology:
    """Azure NDv5 (ND H100 v5)."""
    return load("ndv5")


def mi250() -> Topology:
    """AMD MI250 board, 8 GCDs; ``links`` counts 50 GB/s xGMI links."""
    return load("mi250")


def mi300x() -> Topology:
    """AMD MI300X platform, 8 GPUs fully connected at 64 GB/s per direction."""
    return load("mi300x")


def amd4() -> Topology:
    """msccl-tools' amd4 ring (unitless link counts).

    >>> amd4().links
    [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]
    """
    return load("amd4")


def amd8() -> Topology:
    """msccl-tools' amd8 weighted mesh (unitless link weights 5 and 6)."""
    return load("amd8")
