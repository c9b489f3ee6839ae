"""MSCCL++ execution plans: the sibling plan IR, its JSON reader, verifier and runtimes.

>>> from msccl_py.targets.mscclpp.ir import Plan
"""
