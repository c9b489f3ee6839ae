"""msccl_py: compiler, verifier and runtimes for MSCCLang-style collective algorithms.

Heavy subpackages (language, runtimes) are imported lazily so that
``import msccl_py`` stays cheap and never needs CuPy or lark.
"""

from msccl_py.errors import (CycleError, LimitError, LinkError, LoweringError, MscclDeadlockError,
                             MscclError, MscclRuntimeError, ProgramError, SizeError, TopologyError,
                             VerificationError, XmlError)

from msccl_py.version import __version__  # noqa: E402,F401

__all__ = ["MscclError", "ProgramError", "TopologyError", "LinkError", "LoweringError",
           "CycleError", "XmlError", "LimitError", "VerificationError", "MscclRuntimeError",
           "MscclDeadlockError", "SizeError", "launch", "init"]


def __getattr__(name):
    if name == "launch":
        from msccl_py.comm.local import launch
        return launch
    if name == "init":
        from msccl_py.comm.join import init
        return init
    raise AttributeError(f"module 'msccl_py' has no attribute {name!r}")
