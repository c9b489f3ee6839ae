"""Which launch started this process, read from the environment the launcher set.

* torchrun and ``torch.distributed``'s ``env://``: ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``;
* Open MPI's ``mpirun``: ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,
  ``OMPI_COMM_WORLD_LOCAL_RANK``;
* MPICH / Intel MPI (Hydra) and other PMI launchers: ``PMI_RANK``,
  ``PMI_SIZE`` (``MPI_LOCALRANKID`` when set).

Under both an MPI launcher and torch variables (a torch script started by
mpirun that set ``RANK`` itself) ``launcher`` picks; ``auto`` prefers the
MPI launcher, which is the one that started the process.

>>> env = detect({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
...               "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
>>> env.kind, env.engine, env.rank, env.world_size, env.local_rank
('openmpi', 'mpi', 3, 4, 1)
>>> detect({}) is None
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from msccl_py.errors import MscclRuntimeError

LAUNCHERS = ("auto", "torch", "mpi")


@dataclass(frozen=True)
class LaunchEnv:
    """This process's place in a launch."""

    kind: str                   # "torchrun", "torch-env", "openmpi" or "pmi"
    rank: int
    world_size: int
    local_rank: int | None = None
    master: str | None = None   # MASTER_ADDR:MASTER_PORT (torch launches)

    @property
    def engine(self) -> str:
        """The engine the launch runs, which carries connections between hosts."""
        return "gloo" if self.kind in ("torchrun", "torch-env") else "mpi"


def _int(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise MscclRuntimeError(f"${name}={raw!r} is not an integer") from None


def _checked(kind: str, rank_var: str, size_var: str, rank: int | None, size: int | None,
             **extra) -> LaunchEnv:
    if rank is None or size is None:
        missing = rank_var if rank is None else size_var
        raise MscclRuntimeError(f"{kind} launch: ${missing} is not set")
    if size < 1 or not 0 <= rank < size:
        raise MscclRuntimeError(f"{kind} launch: ${rank_var}={rank} is not a rank of "
                                f"${size_var}={size}")
    return LaunchEnv(kind, rank, size, **extra)


def _mpi(environ: Mapping[str, str]) -> LaunchEnv | None:
    if "OMPI_COMM_WORLD_SIZE" in environ or "OMPI_COMM_WORLD_RANK" in environ:
        return _checked("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        _int(environ, "OMPI_COMM_WORLD_RANK"),
                        _int(environ, "OMPI_COMM_WORLD_SIZE"),
                        local_rank=_int(environ, "OMPI_COMM_WORLD_LOCAL_RANK"))
    if "PMI_SIZE" in environ or "PMI_RANK" in environ:
        return _checked("pmi", "PMI_RANK", "PMI_SIZE", _int(environ, "PMI_RANK"),
                        _int(environ, "PMI_SIZE"),
                        local_rank=_int(environ, "MPI_LOCALRANKID"))
    return None


def _torch(environ: Mapping[str, str]) -> LaunchEnv | None:
    if "WORLD_SIZE" not in environ and "RANK" not in environ:
        return None
    kind = "torchrun" if "TORCHELASTIC_RUN_ID" in environ else "torch-env"
    addr, port = environ.get("MASTER_ADDR"), environ.get("MASTER_PORT")
    if not addr or not port:
        raise MscclRuntimeError(f"{kind} launch: $RANK and $WORLD_SIZE are set but "
                                f"$MASTER_ADDR and $MASTER_PORT are not (torch's env:// "
                                f"rendezvous needs all four)")
    return _checked(kind, "RANK", "WORLD_SIZE", _int(environ, "RANK"),
                    _int(environ, "WORLD_SIZE"), local_rank=_int(environ, "LOCAL_RANK"),
                    master=f"{addr}:{port}")


def detect(environ: Mapping[str, str] = os.environ, launcher: str = "auto") -> LaunchEnv | None:
    """The launch this process belongs to, or None when no launcher's variables are set.

    Raises :class:`~msccl_py.errors.MscclRuntimeError` for variables that
    are set but wrong (not integers, a rank outside the world, a torch launch
    without its rendezvous address).
    """
    if launcher not in LAUNCHERS:
        raise MscclRuntimeError(f"unknown launcher {launcher!r}; use one of "
                                f"{', '.join(LAUNCHERS)}")
    if launcher == "torch":
        return _torch(environ)
    if launcher == "mpi":
        return _mpi(environ)
    return _mpi(environ) or _torch(environ)
