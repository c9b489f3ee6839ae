"""The MSCCL++ plan's machine: its geometry, op kinds, memory model and one-process executor.

Shared by the MSCCL++ verifier (:mod:`msccl_py.verify.mscclpp`) and runtimes
(:mod:`msccl_py.runtime.mscclpp`), as :mod:`msccl_py.plan.events` is for MSCCL XML.
"""
