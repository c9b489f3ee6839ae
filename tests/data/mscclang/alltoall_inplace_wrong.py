# Declares an in-place alltoall but relies on separate input and output
# buffers: Check() must report it.
import sys

from msccl_py.language import *
from msccl_py.topologies import *
from msccl_py.language.collectives import AllToAll

size = int(sys.argv[1])
with MSCCLProgram("a2a_inplace_wrong", fully_connected(size), AllToAll(size, 1, True), 1):
    for r in range(size):
        for q in range(size):
            chunk(r, Buffer.input, q).copy(q, Buffer.output, r)
    Check()
    XML()
