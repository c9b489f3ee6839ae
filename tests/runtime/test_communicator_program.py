"""``comm.program()`` says which program a call ran."""

import numpy as np

from msccl_py.comm.local import launch


def _which(comm):
    comm.all_reduce(np.ones(1000, np.float32))
    choice = comm.program("allreduce", 4000)
    prog, key = choice                       # still unpacks as (rank program, key)
    return repr(choice), choice.name, choice.params, prog.name, isinstance(key, int)


def test_program_names_the_library_program_and_its_parameters():
    text, name, params, prog_name, keyed = launch(_which, 2)[0]
    assert text.startswith(f"{name}(") and len(text) < 200
    assert prog_name.startswith(name) and keyed
    assert params["instances"] >= 1 and "protocol" in params

