"""One shared arena per host for ranks that a launcher started (torchrun, mpirun).

:func:`join_host` is the joined counterpart of
:class:`~msccl_py.runtime.process_group.ProcessGroup`: there, one parent
creates the arena and forks the ranks; here the ranks exist already and meet
through the launch's :class:`~msccl_py.transport.engines.Bootstrap`:

1. every rank says which host it is on (``MSCCL_PY_HOST``, else the machine's
   host name and boot id), so ranks with equal values share memory;
2. the lowest rank of each host creates the arena (a memfd: never in
   ``/dev/shm``, freed by the kernel when the last rank holding it exits) and
   the semaphores in it, and says where it is (process id, descriptor);
3. the others map it through ``/proc/<pid>/fd/<fd>``; a last exchange
   confirms every rank is attached before anyone goes on.

:func:`watch_peers` then stops a host's ranks when one of them dies: a
launcher's parent sees its children die, strangers must watch each other.

>>> host_identity({"MSCCL_PY_HOST": "node7"})
'node7'
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from msccl_py.errors import MscclRuntimeError
from msccl_py.transport import shm_arena as A
from msccl_py.transport.engines import Bootstrap
from msccl_py.transport.shm_sem import ShmSemaphore

ENV_HOST = "MSCCL_PY_HOST"


def host_identity(environ: Mapping[str, str] = os.environ) -> str:
    """What says two ranks can share memory: ``$MSCCL_PY_HOST``, else host name and boot id."""
    forced = environ.get(ENV_HOST, "").strip()
    if forced:
        return forced
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}" if boot else socket.gethostname()


@dataclass
class HostArena:
    """This rank's view of its host's arena and of the launch's layout."""

    rank: int
    world_size: int
    hosts: list[str]                  # host of each rank
    arena: A.Arena
    pids: list[int]                   # process id of each rank
    #: semaphores by arena index (``Layout.sem_offset``): doorbells, link doorbells, lock
    sems: list[ShmSemaphore] = field(default_factory=list)

    @property
    def host(self) -> str:
        return self.hosts[self.rank]

    @property
    def host_names(self) -> list[str]:
        """Hosts in order of their lowest rank."""
        return list(dict.fromkeys(self.hosts))

    @property
    def local_ranks(self) -> list[int]:
        return [r for r, h in enumerate(self.hosts) if h == self.host]

    @property
    def remote(self) -> frozenset[int]:
        return frozenset(r for r, h in enumerate(self.hosts) if h != self.host)

    @property
    def lock(self) -> ShmSemaphore:
        return self.sems[2 * self.world_size]

    def doorbell(self, rank: int) -> ShmSemaphore:
        """The semaphore the executors post for ``rank``'s link (remote peers)."""
        return self.sems[self.world_size + rank]

    def rank_sems(self) -> list[ShmSemaphore]:
        """What this rank posts for each peer: its doorbell, or for a peer on another host
        this rank's link's doorbell."""
        remote = self.remote
        return [self.doorbell(self.rank) if p in remote else self.sems[p]
                for p in range(self.world_size)]

    def local_sems(self) -> list[ShmSemaphore]:
        """Every doorbell of this host's ranks and links (what a failure must wake)."""
        return [s for r in self.local_ranks for s in (self.sems[r], self.doorbell(r))]

    def close(self) -> None:
        self.sems = []
        self.arena.close()


def join_host(boot: Bootstrap, buffsize: int, host: str | None = None) -> HostArena:
    """Meet the launch's other ranks and map this host's arena (every rank calls it)."""
    rank, world = boot.rank, boot.size
    mine = host if host is not None else host_identity()
    info = boot.allgather((mine, os.getpid()))
    hosts, pids = [h for h, _ in info], [p for _, p in info]
    layout = A.Layout(world, int(buffsize), joined=True)
    leader = hosts.index(mine)
    arena = None
    where = None
    failure = None
    if leader == rank:
        try:
            arena = A.Arena.create(layout)
            for i in range(2 * world + 1):
                ShmSemaphore.create(arena.address(layout.sem_offset(i)), 1 if i == 2 * world
                                    else 0)
            where = (os.getpid(), arena.fd)
        except MscclRuntimeError as exc:
            failure = str(exc)
    posted = boot.allgather((where, failure))
    failures = [f"rank {r}: {f}" for r, (_, f) in enumerate(posted) if f]
    if failures:
        if arena is not None:
            arena.close()
        raise MscclRuntimeError("cannot create the hosts' shared arenas: " + "; ".join(failures))
    if arena is None:
        pid, fd = posted[leader][0]
        try:
            arena = A.Arena.attach(layout, fd, pid, inherited=False)
        except OSError as exc:
            failure = (f"rank {rank} cannot map the arena of rank {leader} (pid {pid}) on host "
                       f"{mine!r}: {exc}")
    attached = boot.allgather(failure)
    bad = [f for f in attached if f]
    if bad:
        if arena is not None:
            arena.close()
        raise MscclRuntimeError("; ".join(bad) + f" (ranks with equal {ENV_HOST} must be able "
                                                 f"to share memory)")
    sems = [ShmSemaphore(arena.address(layout.sem_offset(i))) for i in range(2 * world + 1)]
    return HostArena(rank, world, hosts, arena, pids, sems)


def watch_peers(pids: Mapping[int, int], gone: Callable[[int, int], bool],
                on_death: Callable[[int, int], None],
                stop: threading.Event) -> threading.Thread | None:
    """A daemon thread that calls ``on_death(rank, pid)`` when a process in ``pids`` (rank ->
    pid) ends while ``gone(rank, pid)`` says it should not have (it did not finish)."""
    fds = {}
    for r, pid in pids.items():
        try:
            fds[os.pidfd_open(pid)] = (r, pid)
        except (OSError, AttributeError):
            continue    # no pidfd here: the collectives' timeout still ends a stalled call
    if not fds:
        return None

    def run() -> None:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        try:
            while not stop.is_set() and fds:
                for fd, _ in poller.poll(200):
                    r, pid = fds.pop(fd)
                    poller.unregister(fd)
                    os.close(fd)
                    if not stop.is_set() and gone(r, pid):
                        on_death(r, pid)
        finally:
            for fd in fds:
                os.close(fd)

    thread = threading.Thread(target=run, name="msccl_py-watch", daemon=True)
    thread.start()
    return thread
