"""MSCCLang's ``msccl.topologies.amd`` names, so ``from ...topologies.amd import *`` works.

>>> from msccl_py.topologies.amd import amd8
>>> amd8().num_nodes()
8
"""

from msccl_py.topologies.machines import amd4, amd8

__all__ = ["amd4", "amd8"]
