"""The native headers the CPU executors and the GPU kernel share (data, not Python).

platform.h (the only #ifdefs: PTX helpers or their std::atomic_ref
stand-ins) and ops.h (reductions, per element and per 16-byte pack) are the
GPU interpreter's (``cupy/kernel/interp.h``) and the shm runtime's native
executors' arithmetic; shm_rank.h is what those two executors
(``native/shm_exec.cpp`` for MSCCL XML, ``mscclpp/native/plan_exec.cpp`` for
MSCCL++ plans) share: control words, wake-up protocol, call entry, barrier.
Every build of them passes :data:`INCLUDE_DIR` to the compiler (``-I``); a
package so that wheels ship the headers.

>>> sorted(p.name for p in INCLUDE_DIR.glob("*.h"))
['ops.h', 'platform.h', 'shm_rank.h']
"""

from pathlib import Path

#: this folder: the ``-I`` of every native build
INCLUDE_DIR = Path(__file__).resolve().parent
