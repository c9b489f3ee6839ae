"""GPU runtime: a persistent CUDA interpreter kernel for MSCCL algorithms, via CuPy.

One CUDA block runs one XML threadblock; the tables are packed from the
execution plan (:mod:`.packer`), the kernel source lives in ``kernel/``.
Importing this package never needs CuPy; asking for the device backend
without CuPy or a GPU raises one :class:`~msccl_py.errors.MscclRuntimeError`.
The same kernel source also builds for the host (:mod:`.emulation`), which
is how it is tested on machines without a GPU.

Entry points: :func:`run` (device, ``placement`` ``one-gpu`` / ``devices`` /
``host``), :func:`emulated_run` (g++ build of the kernel), both with
``reference.run``'s contract.

>>> import msccl_py.runtime.cupy as gpu
>>> callable(gpu.run) and callable(gpu.emulated_run)
True
"""

from __future__ import annotations

from msccl_py.runtime.cupy.emulation import EmulatedRuntime, emulated_run

__all__ = ["PLACEMENTS", "EmulatedRuntime", "available", "emulated_run", "run"]

PLACEMENTS = ("one-gpu", "devices", "host")


def available() -> str | None:
    """None when the device backend can run here, else the reason it cannot."""
    from msccl_py.runtime.cupy.device import unavailable_reason
    return unavailable_reason()


def run(alg, inputs, op: str = "sum", placement: str = "one-gpu", **kwargs):
    """Run ``alg`` on GPUs with CuPy; same contract as ``reference.run``.

    ``placement``: ``one-gpu`` (all ranks' blocks in one cooperative launch on
    the current device), ``devices`` (rank r on device r, peer access), or
    ``host`` (the host-driven fallback: one CuPy operation per step).
    Inputs may be NumPy or CuPy arrays; outputs are NumPy arrays unless
    ``as_cupy=True``.
    """
    from msccl_py.runtime.cupy.backend import run as _run
    return _run(alg, inputs, op, placement=placement, **kwargs)
