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

from msccl_py.plan.reductions import fused_reductions
from msccl_py.targets.msccl.dialects import (DEFAULT_TARGET, DIALECTS, MAX_BYTES_UNBOUNDED,
                                             Dialect, check_limits, default_target, get_dialect,
                                             xml_step_count)
from msccl_py.targets.msccl.read import read_xml
from msccl_py.targets.msccl.overview import summary
from msccl_py.targets.msccl.write import hoist_reduce_dependencies, s_to_ir_index, write_xml

__all__ = ["read_xml", "write_xml", "summary", "check_limits", "get_dialect", "Dialect",
           "DIALECTS", "MAX_BYTES_UNBOUNDED", "s_to_ir_index", "xml_step_count",
           "fused_reductions", "hoist_reduce_dependencies", "DEFAULT_TARGET", "default_target"]
