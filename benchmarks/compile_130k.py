"""Ring allreduce at 128 ranks x 8 channels x 4 instances (130k XML steps), as a user writes it.

An MSCCLang script in msccl-tools' style: build the program, ``XML()``
(which judges, verifies and writes the XML to stdout), then ``Check()``.
What counts is the whole process, interpreter start and imports included::

    hyperfine -r 5 'python benchmarks/compile_130k.py > /tmp/ring.xml'

Arguments (all optional): ``RANKS CHANNELS INSTANCES``.
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.topologies import fully_connected

n, channels, instances = [int(a) for a in sys.argv[1:]] + [128, 8, 4][len(sys.argv) - 1:]
with MSCCLProgram(f"allreduce_ring_{channels}ch", fully_connected(n), AllReduce(n, n, True),
                  instances, threadblock_policy=ThreadblockPolicy.manual):
    for step in range(n - 1):  # reduce-scatter: chunk k collects its sum on its way round
        for k in range(n):
            ch = k % channels
            chunk((k + step + 1) % n, Buffer.input, k).reduce(
                chunk((k + step) % n, Buffer.input, k), ch=ch, sendtb=ch, recvtb=ch)
    for step in range(n - 1):  # allgather: the sums travel on round the ring
        for k in range(n):
            ch = k % channels
            chunk((k + step - 1) % n, Buffer.input, k).copy((k + step) % n, Buffer.input, k,
                                                            ch=ch, sendtb=ch, recvtb=ch)
    XML()
    Check()
