"""One process per GPU: the interpreter over CUDA IPC, bootstrapped by the shm process group.

Each rank process drives one GPU. Per algorithm it allocates one arena with
``cudaMalloc`` (never the pool: ``ipcGetMemHandle`` on a pool sub-allocation
names the pool's whole block) holding the FIFO control words of every
connection and the FIFO data of the connections it receives on. The 64-byte
handles are exchanged through the shm runtime's communicator
(``all_gather``), peers' arenas are opened with ``ipcOpenMemHandle``, and a
connection's tail, recvStep and data live with its receiver, its head and
sendStep with its sender. Senders push into the receiver's FIFO and never
touch peers' user buffers. Every rank counts calls the same way, so the
epoch-tagged flags and monotone FIFO counters need no barrier between calls.
Teardown: barrier, close the opened handles, barrier, free the arena.

>>> from msccl_py import launch                          # doctest: +SKIP
>>> def work(comm):                                      # doctest: +SKIP
...     import cupy as cp
...     return cp.asnumpy(comm.all_reduce(cp.full(1 << 20, comm.rank + 1.0)))
>>> launch(work, 8, backend="cupy")[0][:2]               # doctest: +SKIP
array([36., 36.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.plan.contract import REDUCING
from msccl_py.runtime.cupy import calls, device, packer
from msccl_py.plan.geometry import geometry

HANDLE_BYTES = 64


class RankPlan:
    """One algorithm resident on this rank's GPU, wired to its peers over IPC."""

    def __init__(self, alg: ir.Algorithm, rank: int, exchange: Callable[[bytes], list[bytes]],
                 buffsize: int | None = None, watchdog: float = 5.0,
                 threads: int | None = None):
        cp = device.require_cupy()
        self.cp, self.alg, self.rank = cp, alg, rank
        self.packed = pk = packer.pack(alg)
        self.buffsize, self.watchdog, self.threads = buffsize, float(watchdog), threads
        self.first, self.last = pk.rank_block_range(rank)
        conns = pk.plan.conns
        self.fifo_bytes = packer.NSLOTS * geometry(alg.protocol, buffsize).slot_data_bytes
        # every rank lays out every arena the same way: ctrl words, then the FIFOs of the
        # connections that rank receives on, in connection order
        self.ctrl_bytes = max(1, pk.nconns) * packer.CTRL_WORDS * 8
        slot_of, per_rank = {}, [0] * pk.plan.ngpus
        for c in range(pk.nconns):
            q = int(conns[c, 2])
            slot_of[c] = per_rank[q]
            per_rank[q] += 1
        nbytes = self.ctrl_bytes + per_rank[rank] * self.fifo_bytes + 256
        rt = cp.cuda.runtime
        self.ptr = rt.malloc(nbytes)
        self.opened: list[int] = []
        try:
            rt.memset(self.ptr, 0, nbytes)
            rt.deviceSynchronize()
            handles = exchange(bytes(rt.ipcGetMemHandle(self.ptr)))
            bases = []
            for r, h in enumerate(handles):
                if r == rank:
                    bases.append(self.ptr)
                else:
                    p = rt.ipcOpenMemHandle(h)
                    self.opened.append(p)
                    bases.append(p)
        except Exception:
            self.close_local()
            raise
        fifo = [bases[int(conns[c, 2])] + self.ctrl_bytes + slot_of[c] * self.fifo_bytes
                for c in range(pk.nconns)]
        rctl = [bases[int(conns[c, 2])] + c * packer.CTRL_WORDS * 8 for c in range(pk.nconns)]
        sctl = [bases[int(conns[c, 1])] + c * packer.CTRL_WORDS * 8 for c in range(pk.nconns)]
        table = packer.conn_table(pk, fifo, rctl, sctl)
        if not len(table):
            table = np.zeros((1, packer.CONN_WORDS), dtype=np.uint64)
        self.conns = cp.asarray(table)
        self.blocks = cp.asarray(np.ascontiguousarray(pk.blocks[self.first:self.last]))
        self.steps = cp.asarray(pk.steps if len(pk.steps) else np.zeros((1, 8), np.int32))
        self.deps = cp.asarray(pk.deps if len(pk.deps) else np.zeros((1, 2), np.int32))
        self.reds = cp.asarray(pk.reds)
        self.flags = cp.zeros(max(1, pk.nblocks), dtype=cp.uint64)
        self.err = cp.zeros(packer.ERR_WORDS, dtype=cp.uint64)
        self.waits = cp.zeros((max(1, self.last - self.first), packer.WAIT_WORDS),
                              dtype=cp.uint64)
        self.stream = cp.cuda.Stream(non_blocking=False)
        self.epoch = 0
        self.broken: str | None = None

    def call(self, bufs: list, chunk_elems: int, dtype: str, op: str,
             slice_elems: int | None = None) -> None:
        """Run this rank's blocks on buffers ``bufs`` (i, o, s device arrays or None)."""
        if self.broken:
            raise MscclRuntimeError(f"{self.alg.name}: this communicator is unusable after "
                                    f"an earlier failure ({self.broken})")
        cp, pk = self.cp, self.packed
        shape = packer.call_shape(self.alg.protocol, self.alg.nchunksperloop, chunk_elems,
                                  calls.ITEMSIZE[dtype], self.buffsize, slice_elems)
        if not shape.call.iterations:
            return
        if self.epoch + 1 >= packer.EPOCH_LIMIT:
            raise MscclRuntimeError(f"{self.alg.name}: {packer.EPOCH_LIMIT} calls on one "
                                    "communicator; create a new one")
        self.epoch += 1
        ptrs = np.zeros((pk.plan.ngpus, 3), dtype=np.uint64)
        for b, a in enumerate(bufs):
            ptrs[self.rank, b] = a.data.ptr if a is not None else 0
        self.bufs = cp.asarray(ptrs)
        addrs = packer.device_addrs(self)
        nblocks = self.last - self.first
        if nblocks == 0:
            return
        k = device.kernel(dtype, op, "sys")
        threads = device.fit_threads(k, nblocks, self.threads)
        params = cp.asarray(packer.call_params(pk, shape, self.epoch, self.watchdog, addrs,
                                               nblocks, self.first))
        cp.cuda.runtime.deviceSynchronize()
        end = cp.cuda.Event()
        device.launch(k, nblocks, threads, params, self.stream)
        end.record(self.stream)
        device.wait([end], self.watchdog * 2 + 30.0, f"{self.alg.name} rank {self.rank}")
        err = self.err.get()
        if int(err[packer.ERR_ABORT]):
            self.broken = "a watchdog abort"
            packer.raise_if_aborted(pk, err, self.epoch, self.watchdog, shape,
                                    self.waits.get(), self.first)

    def close_local(self) -> None:
        """Close peers' arenas and free ours (call between barriers, see the module doc)."""
        rt = self.cp.cuda.runtime
        for p in self.opened:
            rt.ipcCloseMemHandle(p)
        self.opened = []

    def free(self) -> None:
        if self.ptr:
            self.cp.cuda.runtime.free(self.ptr)
            self.ptr = 0


#: collectives the GPU communicator offers, with their library operation names
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce")


class GpuCommunicator:
    """One rank's collectives on its GPU (CuPy arrays), over library programs.

    ``shm`` is the rank's shm :class:`~msccl_py.runtime.communicator.Communicator`,
    used to pick programs (``library.select``) and to exchange IPC handles.
    Sizes must divide into the program's chunks (a SizeError says which
    sizes would); results are new CuPy arrays on this rank's device.
    """

    def __init__(self, shm, device_id: int, buffsize: int | None = None,
                 watchdog: float = 5.0):
        self.cp = device.require_cupy()
        self.shm = shm
        self.rank, self.world_size = shm.rank, shm.world_size
        self.device = device_id
        self.cp.cuda.Device(device_id).use()
        self.buffsize, self.watchdog = buffsize, watchdog
        self._plans: dict[tuple, RankPlan] = {}

    def __repr__(self) -> str:
        return f"GpuCommunicator(rank={self.rank}, world_size={self.world_size}, " \
               f"device={self.device})"

    def _exchange(self, blob: bytes) -> list[bytes]:
        padded = np.frombuffer(blob.ljust(HANDLE_BYTES, b"\0")[:HANDLE_BYTES], dtype=np.uint8)
        allh = np.asarray(self.shm.all_gather(padded)).reshape(self.world_size, HANDLE_BYTES)
        return [bytes(row) for row in allh]

    def _plan(self, collective: str, nbytes: int, root: int) -> RankPlan:
        if self.shm.selector is None:
            raise MscclRuntimeError(f"rank {self.rank}: no program selector was given "
                                    "(msccl_py.launch gives the library's)")
        pick = self.shm.selector(collective, nbytes, root)
        plan = self._plans.get(pick.ident)
        if plan is None:
            plan = self._plans[pick.ident] = RankPlan(pick.build(), self.rank, self._exchange,
                                                      self.buffsize, self.watchdog)
        return plan

    def _collective(self, collective: str, x, op: str = "sum", root: int = 0):
        cp = self.cp
        x = cp.asarray(x).reshape(-1)
        dtype = calls.dtype_name(x.dtype)
        plan = self._plan(collective, int(x.nbytes) * (self.world_size if collective in
                                                       ("allgather",) else 1), root)
        alg, pk = plan.alg, plan.packed
        stand_in = [SimpleNamespace(size=x.size, ndim=1, dtype=x.dtype)
                    for _ in range(self.world_size)]
        try:
            lay = calls.layout(alg, pk.plan, stand_in, dtype, None)
        except SizeError as exc:
            raise SizeError(f"{collective} of {x.size} elements on {self.world_size} ranks with "
                            f"{alg.name}: {exc}") from exc
        r = self.rank
        store = []
        for b in range(3):
            n = int(lay.storage[r, b])
            store.append(cp.empty(max(1, n), dtype=x.dtype) if n or b == 0 else None)
        base, off = lay.offset(r, 0)
        store[base][off:off + x.size] = x
        views = []
        for b in range(3):
            base, off = lay.offset(r, b)
            views.append(store[base][off:] if store[base] is not None else None)
        plan.call(views, lay.chunk_elems, dtype, op)
        base, off = lay.offset(r, 1)
        out = store[base][off:off + int(lay.call_chunks[r, 1]) * lay.chunk_elems].copy()
        if op == "avg" and collective in REDUCING:
            out = _divide(cp, out, self.world_size)
        return out

    def all_reduce(self, x, op: str = "sum"):
        return self._collective("allreduce", x, op)

    def all_gather(self, x):
        return self._collective("allgather", x)

    def reduce_scatter(self, x, op: str = "sum"):
        return self._collective("reduce_scatter", x, op)

    def all_to_all(self, x):
        return self._collective("alltoall", x)

    def broadcast(self, x, root: int = 0):
        return self._collective("broadcast", x, root=root)

    def reduce(self, x, root: int = 0, op: str = "sum"):
        out = self._collective("reduce", x, op, root)
        return out if self.rank == root else None

    def barrier(self) -> None:
        self.shm.barrier()

    def close(self) -> None:
        """Teardown: barrier, close peers' arenas, barrier, free our own."""
        self.shm.barrier()
        for p in self._plans.values():
            p.close_local()
        self.cp.cuda.runtime.deviceSynchronize()
        self.shm.barrier()
        for p in self._plans.values():
            p.free()
        self._plans = {}


def _divide(cp, out, n: int):
    if out.dtype.kind in "iu":
        return (cp.sign(out) * (cp.abs(out) // n)).astype(out.dtype)
    return (out / n).astype(out.dtype)


def _rank_main(rt, conn, fn: Callable, args: tuple, devices, options: dict,
               selector: Callable | None = None) -> Any:
    from msccl_py.runtime.communicator import Communicator
    cp = device.require_cupy()
    shm = Communicator(rt, selector=selector(rt.world_size) if selector is not None else None)
    ndev = cp.cuda.runtime.getDeviceCount()
    dev = devices[shm.rank] if devices is not None else shm.rank % ndev
    comm = GpuCommunicator(shm, dev, **options)
    try:
        return fn(comm, *args)
    finally:
        comm.close()


def launch(fn: Callable, world_size: int, args: Sequence = (), *,
           devices: Sequence[int] | None = None, buffsize: int | None = None,
           watchdog: float = 5.0, timeout: float | None = None,
           start_method: str | None = None, selector: Callable | None = None) -> list:
    """Run ``fn(comm, *args)`` in ``world_size`` processes, one GPU each; results in rank order.

    Rank r uses device ``devices[r]`` (default ``r % device count``). Return
    host data (NumPy) from ``fn``: the results travel back by pickle.
    ``selector``: as for :func:`msccl_py.runtime.communicator.launch` (required
    for collectives: the GPU path runs library programs only).
    """
    from msccl_py.runtime import process_group as pg
    reason = device.unavailable_reason()
    if reason is not None:
        raise MscclRuntimeError(f"the cupy backend is unavailable: {reason}")
    group = pg.ProcessGroup(world_size, start_method=start_method,
                            timeout=float(timeout or pg.DEFAULT_TIMEOUT))
    try:
        group.start(_rank_main, (fn, tuple(args), None if devices is None else list(devices),
                                 {"buffsize": buffsize, "watchdog": watchdog}, selector))
        return group.wait()
    finally:
        group.close()
