"""MSCCLang's ``msccl.topologies.nvidia`` names, so ``from ...topologies.nvidia import *`` works.

>>> from msccl_py.topologies.nvidia import dgx1
>>> dgx1().num_nodes()
8
"""

from msccl_py.topologies.machines import dgx1, dgx_a100
from msccl_py.topologies.nvidia_smi import nvlink_only

__all__ = ["dgx1", "dgx_a100", "nvlink_only"]
