"""MSCCL XML: the lowered IR to and from the format the MSCCL runtimes load.

* :mod:`.read`: XML text or file to :class:`msccl_py.ir.Algorithm` (:func:`read_xml`).
* :mod:`.write`: the IR to XML text for one runtime dialect (:func:`write_xml`).
* :mod:`.dialects`: the runtimes (msccl, msccl-executor, rccl), their limits and
  :func:`check_limits`.
* :mod:`.overview`: the overview ``msccl-py info`` prints (:func:`summary`).

>>> from msccl_py.targets.msccl import read_xml, write_xml
>>> text = write_xml(read_xml('<algo name="x" proto="LL" nchannels="1" nchunksperloop="1" '
...                           'ngpus="1" coll="allreduce" inplace="1"><gpu id="0" i_chunks="1" '
...                           'o_chunks="0" s_chunks="0"/></algo>'), "msccl")
>>> text.splitlines()[1]
'  <gpu id="0" i_chunks="1" o_chunks="0" s_chunks="0">'
"""

import importlib

#: public name -> the module (of this package, but one) that defines it, imported on first
#: use: writing XML needs neither the reader nor lxml
_HOMES = {"read_xml": ".read", "write_xml": ".write", "summary": ".overview",
          "check_limits": ".dialects", "get_dialect": ".dialects", "Dialect": ".dialects",
          "DIALECTS": ".dialects", "MAX_BYTES_UNBOUNDED": ".dialects",
          "s_to_ir_index": ".write", "xml_step_count": ".dialects",
          "fused_reductions": "msccl_py.plan.reductions",
          "hoist_reduce_dependencies": ".write", "DEFAULT_TARGET": ".dialects",
          "default_target": ".dialects"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
