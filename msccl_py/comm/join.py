"""``msccl_py.init()``: join the launch that started this process and return its communicator.

:func:`msccl_py.launch` starts its own ranks; under torchrun or mpirun the
ranks exist already. :func:`init` reads the launch from the environment
(:mod:`.launch_env`), meets the other ranks through the launch's own
meeting point (torch's store, or MPI's allgather), maps one shared arena per
host (:mod:`msccl_py.transport.shm_host`), and, when the launch spans
hosts, gives each rank a link (:mod:`msccl_py.runtime.shm_link`) that carries
its connections to other hosts over the launch's engine: gloo under torch,
MPI under mpirun. The communicator it returns has the API of
:func:`msccl_py.launch`'s; its programs know the launch's layout (hosts ×
ranks per host).

>>> comm = init()                           # doctest: +SKIP  (under torchrun/mpirun)
>>> comm.all_reduce(np.ones(4))             # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable

from msccl_py.comm import debug
from msccl_py.comm.launch_env import LaunchEnv, detect
from msccl_py.errors import MscclRuntimeError
from msccl_py.transport import shm_arena as A
from msccl_py.runtime import shm_native
from msccl_py.runtime.process_group import DEFAULT_BUFFSIZE, DEFAULT_TIMEOUT
from msccl_py.runtime.shm_exec import RankRuntime
from msccl_py.runtime.shm_link import Link
from msccl_py.transport.engines import Bootstrap, Engine, MpiBootstrap, MpiEngine, \
    StoreBootstrap
from msccl_py.transport.layout import LaunchLayout
from msccl_py.transport.shm_host import HostArena, join_host, watch_peers


class JoinedGroup:
    """What a rank of a joined launch holds: its host's arena, runtime, link and engine."""

    def __init__(self, host: HostArena, runtime: RankRuntime, engine: Engine | None,
                 link: Link | None, launch: str):
        self.host, self.runtime, self.engine, self.link = host, runtime, engine, link
        self.launch = launch
        self.layout = LaunchLayout.of(host.hosts)
        self._stop = threading.Event()
        self._closed = False
        rt = runtime
        local = {r: host.pids[r] for r in host.local_ranks if r != host.rank}
        wake = host.local_sems()

        def died(rank: int, pid: int) -> None:
            rt.abort(A.ABORT_DIED, f"rank {rank} (pid {pid}, host {host.host!r}) died",
                     origin=rank)
            for sem in wake:
                sem.release()

        self._watch = watch_peers(local, lambda r, _pid: not rt.control.done(r), died,
                                  self._stop)

    @property
    def transports(self) -> list[str]:
        """``shm`` within a host, then the engine between hosts (when there are several)."""
        return ["shm"] + ([self.engine.name] if self.link is not None else [])

    def close(self) -> None:
        """Leave the group (every rank closes; the link drains first)."""
        if self._closed:
            return
        self._closed = True
        self.runtime.finish()
        self._stop.set()
        try:
            if self.link is not None:
                self.link.close()
        finally:
            if self.engine is not None:
                self.engine.close()
            self.host.close()


def join(boot: Bootstrap, make_engine: Callable[[], Engine] | None, *, launch: str,
         timeout: float | None = None, buffsize: int | None = None, host: str | None = None,
         engine_always: bool = False) -> JoinedGroup:
    """Every rank of a launch calls this with the launch's meeting point; ``make_engine``
    builds the engine between hosts (collectively: called on every rank or none)."""
    shm_native.library()    # build (or load) before the others wait on us
    joined = join_host(boot, int(buffsize or DEFAULT_BUFFSIZE), host)
    multi = len(joined.host_names) > 1
    try:
        engine = None
        if multi or engine_always:
            if make_engine is None:
                raise MscclRuntimeError(f"the launch spans {len(joined.host_names)} hosts but "
                                        f"no engine can carry connections between them")
            engine = make_engine()
        rank, world, remote = boot.rank, boot.size, joined.remote
        rt = RankRuntime(joined.arena, rank, world, joined.rank_sems(), joined.lock,
                         float(timeout or DEFAULT_TIMEOUT), os.getppid(),
                         records=joined.arena.layout.records(rank, remote))
        link = None
        if multi:
            link = Link(rt, engine, remote, joined.doorbell(rank), joined.local_sems())
            rt.link = link
    except BaseException:
        joined.close()
        raise
    boot.barrier()      # every rank's link listens before anyone sends
    return JoinedGroup(joined, rt, engine, link, launch)


def _torch_store(env: LaunchEnv, timeout: float):
    """The launch's store: the default group's when torch.distributed is initialised, else
    a client of torchrun's (or ``env://``'s) TCP store."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise MscclRuntimeError(f"this is a torch launch ({env.kind}) but torch is not "
                                f"installed: {exc}") from None
    if dist.is_available() and dist.is_initialized():
        from torch.distributed import distributed_c10d as c10d
        return dist.PrefixStore("msccl_py/init/", c10d._get_default_store())
    from datetime import timedelta
    store, _, _ = next(dist.rendezvous("env://", env.rank, env.world_size,
                                       timeout=timedelta(seconds=timeout)))
    return dist.PrefixStore("msccl_py/init/", store)


def _mpi_world(env: LaunchEnv):
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise MscclRuntimeError(f"this is an MPI launch ({env.kind}) and joining it needs "
                                f"mpi4py (pip install 'msccl-py[mpi]'): {exc}") from None
    comm = MPI.COMM_WORLD
    if comm.Get_size() != env.world_size or comm.Get_rank() != env.rank:
        raise MscclRuntimeError(f"MPI says rank {comm.Get_rank()} of {comm.Get_size()} but the "
                                f"environment says rank {env.rank} of {env.world_size}")
    return comm


def join_launch(env: LaunchEnv, *, timeout: float | None = None, buffsize: int | None = None,
                host: str | None = None) -> JoinedGroup:
    """Join the launch ``env`` describes (see :func:`init`)."""
    wait = float(timeout or DEFAULT_TIMEOUT)
    if env.engine == "gloo":
        from msccl_py.transport.engines import GlooEngine
        store = _torch_store(env, wait)
        boot = StoreBootstrap(store, env.rank, env.world_size)
        return join(boot, lambda: GlooEngine.from_store(store, env.rank, env.world_size, wait),
                    launch=env.kind, timeout=timeout, buffsize=buffsize, host=host)
    comm = _mpi_world(env)
    return join(MpiBootstrap(comm), lambda: MpiEngine(comm), launch=env.kind, timeout=timeout,
                buffsize=buffsize, host=host)


def init(*, launcher: str = "auto", programs: str = "library", timeout: float | None = None,
         buffsize: int | None = None, host: str | None = None):
    """This rank's :class:`~msccl_py.runtime.communicator.Communicator` in the launch that
    started the process (torchrun, ``torch.distributed`` env://, mpirun).

    ``host`` (default ``$MSCCL_PY_HOST``, else the machine) says which ranks
    share memory. The group closes at exit, or with ``comm.close()`` (every
    rank). ``MSCCL_PY_DEBUG=INFO`` prints the layout and transports, then
    which program each collective runs.
    """
    from msccl_py.comm.selector import Selector
    from msccl_py.runtime.communicator import Communicator
    env = detect(launcher=launcher)
    if env is None:
        raise MscclRuntimeError("msccl_py.init() found no launch (no torchrun, env://, Open MPI "
                                "or PMI variables): start the script under torchrun or mpirun, "
                                "or use msccl_py.launch(fn, n) to start ranks")
    group = join_launch(env, timeout=timeout, buffsize=buffsize, host=host)
    try:
        selector = Selector(env.world_size, group.layout)
        comm = Communicator(group.runtime, programs, selector=selector, group=group)
    except BaseException:
        group.close()
        raise
    debug.joined(group, env.world_size)
    atexit.register(comm.close)
    return comm
