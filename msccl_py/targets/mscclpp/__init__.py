"""MSCCL++ execution plans as a format: JSON reader, writer, schema, emitter (MSCCL IR -> plan), limits.

>>> from msccl_py.mscclpp_ir import Plan
"""
