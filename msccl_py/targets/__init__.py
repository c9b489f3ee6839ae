"""The formats algorithms leave and enter the toolchain as, side by side.

* :mod:`msccl_py.targets.msccl`: MSCCL XML (reader, writer, runtime dialects and limits).
* :mod:`msccl_py.targets.mscclpp`: MSCCL++ JSON execution plans (their IR, reader,
  writer, lowering from the MSCCL IR, verifier and runtimes).

Neither imports the other; both sit on the plan and transport layers.
"""
