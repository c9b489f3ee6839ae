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

import importlib

#: public name -> its module, imported on first use: a program that builds a generic
#: topology loads neither the file parsers nor nvidia-smi's
_HOMES = {"Topology": ".topology", "fully_connected": ".generic", "ring": ".generic",
          "line": ".generic", "star": ".generic", "hub_and_spoke": ".generic",
          **dict.fromkeys(("dgx1", "dgx2", "dgx_a100", "dgx_h100", "hgx_h200", "ndv2", "ndv4",
                           "ndv5", "mi250", "mi300x", "amd4", "amd8"), ".machines"),
          "nvlink_only": ".nvidia_smi", "read_nvidia_smi": ".nvidia_smi",
          "reverse_topology": ".transforms", "binarize_topology": ".transforms",
          "distributed_fully_connected": ".distributed",
          "distributed_hub_and_spoke": ".distributed", "load": ".library", "loads": ".library",
          "resolve": ".library", "available": ".library", "search_path": ".library"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
