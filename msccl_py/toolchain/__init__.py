"""The toolchain: one service that turns a program and a target into an artifact.

Sources are a DSL program's :class:`Recording` (the DSL records it; the
library's programs are DSL programs too), a lowered ``ir.Algorithm``, or a
program file run under a :func:`capture`. Targets are the MSCCL XML dialects
and ``mscclpp``. The artifact carries the IR, the verifier's verdict, the
target text and the notes to say; nothing here prints or changes its input.
The toolchain sits below the DSL and the library and imports neither: the
DSL's ``XML()`` and ``Check()``, the library, the commands and the tuner
call it.

>>> from msccl_py.language import MSCCLProgram, Buffer, chunk
>>> from msccl_py.language.collectives import AllGather
>>> with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
...     for r in range(2):
...         _ = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
>>> art = compile(prog.recording(), "msccl")
>>> print(art.verdict)
ok: allgather postcondition holds (out-of-place); deadlock-free with small and large messages
"""

from msccl_py.toolchain.artifact import Artifact, Policy
from msccl_py.toolchain.capture import Capture, capture, innermost, register, run_program_file
from msccl_py.toolchain.judge import Judgement, failure_message, judge, postcondition
from msccl_py.toolchain.pipeline import MSCCLPP, compile, lower
from msccl_py.toolchain.sources import ProgramLog, Recording

__all__ = ["compile", "lower", "judge", "postcondition", "failure_message", "Judgement",
           "capture", "innermost", "register", "run_program_file", "Capture", "Artifact",
           "Policy", "Recording", "ProgramLog", "MSCCLPP", "algorithm_to_json", "algorithm_from_json"]


def __getattr__(name: str):
    # JSON persistence (and its json import) only for the callers that use it
    if name in ("algorithm_to_json", "algorithm_from_json"):
        from msccl_py.toolchain import persist
        return getattr(persist, name)
    raise AttributeError(f"module 'msccl_py.toolchain' has no attribute {name!r}")
