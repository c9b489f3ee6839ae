"""``import msccl_py.torch`` registers the ``msccl`` torch.distributed backend (cpu and cuda).

>>> import msccl_py.torch                                     # doctest: +SKIP
>>> torch.distributed.init_process_group("msccl")             # doctest: +SKIP

Under torchrun every collective of ``torch.distributed`` (and so DDP) then
runs msccl_py's library programs: see :mod:`msccl_py.torch.backend` and
docs/torch.md.
"""

#: how to install the CPU build of torch this backend is tested with (README.md, docs/torch.md)
TORCH_INSTALL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"

try:
    import torch  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "torch":
        raise
    raise ModuleNotFoundError(f"msccl_py.torch needs torch, which is not installed: "
                              f"{TORCH_INSTALL}", name="torch") from None

from msccl_py.torch.backend import NAME, ProcessGroupMSCCL, create, register  # noqa: E402

__all__ = ["NAME", "ProcessGroupMSCCL", "create", "register"]

register()
