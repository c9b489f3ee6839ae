"""Which launch started this process, from the variables torchrun, env:// and MPI set."""

from __future__ import annotations

import pytest

from msccl_py.comm.launch_env import detect
from msccl_py.errors import MscclRuntimeError

TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "job"}


def test_torchrun_and_env_launches():
    env = detect(TORCHRUN)
    assert (env.kind, env.engine, env.rank, env.world_size, env.local_rank, env.master) == \
        ("torchrun", "gloo", 5, 8, 1, "10.0.0.1:29500")
    plain = {k: v for k, v in TORCHRUN.items() if k != "TORCHELASTIC_RUN_ID"}
    assert detect(plain).kind == "torch-env"


def test_mpi_launchers():
    ompi = detect({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "16",
                   "OMPI_COMM_WORLD_LOCAL_RANK": "2"})
    assert (ompi.kind, ompi.engine, ompi.rank, ompi.world_size, ompi.local_rank) == \
        ("openmpi", "mpi", 2, 16, 2)
    pmi = detect({"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0"})
    assert (pmi.kind, pmi.engine, pmi.rank, pmi.world_size) == ("pmi", "mpi", 0, 2)


def test_both_present_the_launcher_decides():
    both = dict(TORCHRUN, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="8")
    assert detect(both).kind == "openmpi"                   # mpirun started the process
    assert detect(both, launcher="torch").kind == "torchrun"
    assert detect(both, launcher="mpi").rank == 1
    assert detect({}) is None and detect({"PATH": "/bin"}, launcher="torch") is None


@pytest.mark.parametrize("environ, message", [
    ({"RANK": "0", "WORLD_SIZE": "2"}, "$MASTER_ADDR and $MASTER_PORT are not"),
    ({"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "2"},
     "$OMPI_COMM_WORLD_RANK='x' is not an integer"),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"},
     "$OMPI_COMM_WORLD_RANK=2 is not a rank of $OMPI_COMM_WORLD_SIZE=2"),
    ({"PMI_RANK": "0"}, "pmi launch: $PMI_SIZE is not set"),
])
def test_wrong_variables_are_named(environ, message):
    with pytest.raises(MscclRuntimeError, match=message.replace("$", r"\$")):
        detect(environ)


def test_unknown_launcher():
    with pytest.raises(MscclRuntimeError, match="unknown launcher 'slurm'; use one of auto"):
        detect({}, launcher="slurm")


def test_init_outside_a_launch_says_how(monkeypatch):
    import msccl_py
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
              "PMI_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(MscclRuntimeError, match="found no launch .* start the script under "
                                                 "torchrun or mpirun"):
        msccl_py.init()
