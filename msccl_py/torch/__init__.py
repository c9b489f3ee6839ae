"""``import msccl_py.torch`` registers the ``msccl`` torch.distributed backend (cpu and cuda).

>>> import msccl_py.torch                                     # doctest: +SKIP
>>> torch.distributed.init_process_group("msccl")             # doctest: +SKIP

Under torchrun every collective of ``torch.distributed`` (and so DDP) then
runs msccl_py's library programs: see :mod:`msccl_py.torch.backend` and
docs/torch.md.
"""

from msccl_py.torch.backend import NAME, ProcessGroupMSCCL, create, register

__all__ = ["NAME", "ProcessGroupMSCCL", "create", "register"]

register()
