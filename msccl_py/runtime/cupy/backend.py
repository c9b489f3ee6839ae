"""The CuPy device runtime: packed tables, FIFO arenas and cooperative launches.

Placements:

* ``one-gpu``: every rank's blocks in one cooperative grid on one device
  (gpu-scope fences, FIFOs in one arena). It must be one launch: separate
  launches are not guaranteed to run concurrently.
* ``devices``: rank r on device ``devices[r]`` with peer access; each device
  owns its receive FIFOs, tails and the heads of its sends; one launch per
  device, all issued before any synchronisation; sys-scope fences. Senders
  push into remote FIFOs and never touch a peer's user buffers.
* ``host``: the host-driven fallback (:mod:`.host`), one CuPy op per step.

FIFO counters and dependency flags persist across calls on one
:class:`DeviceRuntime` (flags are epoch-tagged, so nothing is memset while a
peer might still run); after a watchdog abort the state is reset.

>>> from msccl_py.runtime.cupy.backend import run   # doctest: +SKIP
>>> run(alg, inputs, "sum", placement="one-gpu")    # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from msccl_py import ir
from msccl_py.errors import MscclRuntimeError
from msccl_py.plan.contract import REDUCING
from msccl_py.runtime.cupy import calls, device, packer

#: seconds a single device wait may last before the watchdog aborts the call
DEFAULT_WATCHDOG = 5.0


@dataclass
class _Group:
    """The blocks one launch runs: on one device, a contiguous range of block rows."""

    device: int
    first: int
    last: int
    blocks: object = None     # device tables (cupy arrays)
    steps: object = None
    deps: object = None
    reds: object = None
    flags: object = None
    err: object = None
    waits: object = None
    conns: object = None
    bufs: object = None
    stream: object = None

    @property
    def nblocks(self) -> int:
        return self.last - self.first


def _host(arr, dev: int, cp) -> np.ndarray:
    with cp.cuda.Device(dev):
        return arr.get()


class DeviceRuntime:
    """One algorithm resident on one or more GPUs (see the module docstring)."""

    def __init__(self, alg: ir.Algorithm, placement: str = "one-gpu",
                 buffsize: int | None = None, watchdog: float = DEFAULT_WATCHDOG,
                 threads: int | None = None, devices: list[int] | None = None):
        cp = device.require_cupy()
        self.cp = cp
        self.alg = alg
        self.packed = pk = packer.pack(alg)
        self.buffsize = buffsize
        self.watchdog = float(watchdog)
        self.threads = threads
        self.placement = placement
        n = pk.plan.ngpus
        if placement == "one-gpu":
            dev = cp.cuda.runtime.getDevice() if devices is None else int(devices[0])
            self.rank_device = [dev] * n
            self.groups = [_Group(dev, 0, pk.nblocks)]
            self.scope = "gpu"
        elif placement == "devices":
            ndev = cp.cuda.runtime.getDeviceCount()
            devs = list(range(n)) if devices is None else [int(d) for d in devices]
            if len(devs) != n or any(not 0 <= d < ndev for d in devs) or len(set(devs)) != n:
                raise MscclRuntimeError(
                    f"placement 'devices' needs {n} distinct devices for {alg.name}, one per "
                    f"rank; this machine has {ndev} (devices={devs})")
            self.rank_device = devs
            self.groups = [_Group(devs[r], *pk.rank_block_range(r)) for r in range(n)]
            self.scope = "sys"
            self._enable_peers(devs)
        else:
            raise MscclRuntimeError(f"unknown placement {placement!r}; choose one-gpu, devices "
                                    "or host")
        # ranks without threadblocks launch nothing (a grid of 0 blocks is an error)
        self.groups = [g for g in self.groups if g.nblocks > 0]
        self.devices = sorted(set(self.rank_device))
        self.epoch = 0
        self.fifo_bytes = 0
        self.fifo: dict[int, object] = {}
        self.ctrl: dict[int, object] = {}
        for d in self.devices:
            with cp.cuda.Device(d):
                self.ctrl[d] = cp.zeros((max(1, pk.nconns), packer.CTRL_WORDS), dtype=cp.uint64)
        for g in self.groups:
            with cp.cuda.Device(g.device):
                blocks = pk.blocks[g.first:g.last]
                g.blocks = cp.asarray(np.ascontiguousarray(blocks))
                g.steps = cp.asarray(pk.steps if len(pk.steps) else np.zeros((1, 8), np.int32))
                g.deps = cp.asarray(pk.deps if len(pk.deps) else np.zeros((1, 2), np.int32))
                g.reds = cp.asarray(pk.reds)
                g.flags = cp.zeros(max(1, pk.nblocks), dtype=cp.uint64)
                g.err = cp.zeros(packer.ERR_WORDS, dtype=cp.uint64)
                g.waits = cp.zeros((max(1, g.nblocks), packer.WAIT_WORDS), dtype=cp.uint64)
                g.stream = cp.cuda.Stream(non_blocking=False)

    def _enable_peers(self, devs: list[int]) -> None:
        rt = self.cp.cuda.runtime
        for a in devs:
            for b in devs:
                if a == b:
                    continue
                if not rt.deviceCanAccessPeer(a, b):
                    raise MscclRuntimeError(f"device {a} cannot access device {b} (no peer "
                                            "access); use placement='one-gpu' or 'host'")
                with self.cp.cuda.Device(a):
                    try:
                        rt.deviceEnablePeerAccess(b)
                    except Exception as exc:  # already enabled is fine
                        if "ALREADY" not in str(exc).upper():
                            raise MscclRuntimeError(f"enabling peer access {a} -> {b} failed: "
                                                    f"{exc}") from exc

    def _conn_tables(self, fifo_bytes: int) -> None:
        cp, pk = self.cp, self.packed
        if fifo_bytes > self.fifo_bytes:
            for d in self.devices:
                with cp.cuda.Device(d):
                    self.fifo[d] = cp.zeros(max(1, pk.nconns) * fifo_bytes + 64, dtype=cp.uint8)
            self.fifo_bytes = fifo_bytes
            conns = pk.plan.conns
            fifo, rctl, sctl = [], [], []
            for c in range(pk.nconns):
                rd = self.rank_device[int(conns[c, 2])]
                sd = self.rank_device[int(conns[c, 1])]
                fifo.append(self.fifo[rd].data.ptr + c * fifo_bytes)
                rctl.append(self.ctrl[rd].data.ptr + c * packer.CTRL_WORDS * 8)
                sctl.append(self.ctrl[sd].data.ptr + c * packer.CTRL_WORDS * 8)
            table = packer.conn_table(pk, fifo, rctl, sctl)
            if not len(table):
                table = np.zeros((1, packer.CONN_WORDS), dtype=np.uint64)
            for g in self.groups:
                with cp.cuda.Device(g.device):
                    g.conns = cp.asarray(table)

    def reset(self) -> None:
        """Forget FIFO counters and flags (after an aborted call; every grid has ended)."""
        for d in self.devices:
            with self.cp.cuda.Device(d):
                self.ctrl[d].fill(0)
        for g in self.groups:
            with self.cp.cuda.Device(g.device):
                g.flags.fill(0)
                g.err.fill(0)
                g.waits.fill(0)
        self.epoch = 0

    def buffers(self, lay: calls.CallLayout) -> list[list]:
        """Fresh device storage for every rank's physical buffers, poisoned."""
        cp = self.cp
        out = []
        for r in range(self.packed.plan.ngpus):
            with cp.cuda.Device(self.rank_device[r]):
                out.append(calls.poisoned_row(cp, lay, r))
        return out

    def launch(self, lay: calls.CallLayout, shape: packer.CallShape, store: list[list],
               op: str) -> float:
        """Run one call on prepared storage; return its device time in seconds."""
        cp, pk = self.cp, self.packed
        self._conn_tables(shape.fifo_bytes)
        if self.epoch + 1 >= packer.EPOCH_LIMIT:
            self.reset()
        self.epoch += 1
        ptrs = np.zeros((pk.plan.ngpus, 3), dtype=np.uint64)
        for r in range(pk.plan.ngpus):
            for b in range(3):
                base, off = lay.offset(r, b)
                ptrs[r, b] = store[r][base].data.ptr + off * lay.itemsize
        plans = []
        for g in self.groups:
            with cp.cuda.Device(g.device):
                k = device.kernel(lay.dtype, op, self.scope, g.device)
                threads = device.fit_threads(k, g.nblocks, self.threads)
                g.bufs = cp.asarray(ptrs)
                params = packer.call_params(pk, shape, self.epoch, self.watchdog,
                                            packer.device_addrs(g),
                                            g.nblocks, g.first)
                plans.append((g, k, threads, cp.asarray(params)))
        for d in self.devices:
            with cp.cuda.Device(d):
                cp.cuda.runtime.deviceSynchronize()
        starts, ends = [], []
        for g, k, threads, params in plans:
            with cp.cuda.Device(g.device):
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record(g.stream)
                device.launch(k, g.nblocks, threads, params, g.stream)
                end.record(g.stream)
                starts.append(start)
                ends.append(end)
        device.wait(ends, self.watchdog * 2 + 30.0, self.alg.name)
        elapsed = max(cp.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)) / 1e3
        for g in self.groups:
            with cp.cuda.Device(g.device):
                err = g.err.get()
            if int(err[packer.ERR_ABORT]):
                waits = np.concatenate([_host(x.waits, x.device, cp) for x in self.groups])
                epoch = self.epoch
                self.reset()
                packer.raise_if_aborted(pk, err, epoch, self.watchdog, shape, waits)
        return elapsed

    def run(self, inputs: list, op: str = "sum", inplace: bool | None = None,
            slice_elems: int | None = None, dtype: str | None = None,
            as_cupy: bool = False) -> list:
        """One call with reference.run's contract; inputs NumPy or CuPy arrays."""
        cp, pk, alg = self.cp, self.packed, self.alg
        lay = calls.layout(alg, pk.plan, inputs, dtype, inplace)
        shape = packer.call_shape(alg.protocol, alg.nchunksperloop, lay.chunk_elems,
                                  lay.itemsize, self.buffsize, slice_elems)
        store = self.buffers(lay)
        hd = calls.host_dtype(lay.dtype)
        for r, x in enumerate(inputs):
            base, off = lay.offset(r, 0)
            with cp.cuda.Device(self.rank_device[r]):
                src = cp.asarray(x).reshape(-1).view(hd)
                store[r][base][off:off + src.size] = src
        self.last_device_s = 0.0
        if shape.call.iterations:
            self.last_device_s = self.launch(lay, shape, store, op)
        outs = []
        for r in range(pk.plan.ngpus):
            base, off = lay.offset(r, 1)
            with cp.cuda.Device(self.rank_device[r]):
                o = store[r][base][off:off + int(lay.call_chunks[r, 1]) * lay.chunk_elems]
                host = cp.asnumpy(o)
            if op == "avg" and alg.collective in REDUCING:
                host = calls.divide_for_avg(host, lay.dtype, alg.ngpus)
            if as_cupy:
                with cp.cuda.Device(self.rank_device[r]):
                    outs.append(cp.asarray(host))
            else:
                outs.append(host)
        return outs

    def time_call(self, chunk_elems: int, dtype: str = "float32", op: str = "sum",
                  inplace: bool | None = None, reps: int = 10, warmup: int = 3,
                  slice_elems: int | None = None) -> float:
        """Best device time (s) of ``reps`` calls on resident buffers (no host copies)."""
        pk, alg = self.packed, self.alg
        hd = calls.host_dtype(dtype)
        fake = [SimpleNamespace(size=int(pk.plan.call_chunks[r, 0]) * chunk_elems, ndim=1,
                                dtype=hd) for r in range(pk.plan.ngpus)]
        lay = calls.layout(alg, pk.plan, fake, dtype, inplace)
        shape = packer.call_shape(alg.protocol, alg.nchunksperloop, lay.chunk_elems,
                                  lay.itemsize, self.buffsize, slice_elems)
        store = self.buffers(lay)
        for r in range(pk.plan.ngpus):
            base, off = lay.offset(r, 0)
            store[r][base][off:off + fake[r].size] = 1
        best = float("inf")
        for i in range(warmup + reps):
            t = self.launch(lay, shape, store, op)
            if i >= warmup:
                best = min(best, t)
        return best


#: the runtime of the last call, reused while calls repeat on one algorithm and options.
#: One entry only: a runtime holds its algorithm and device buffers, so a cache keyed by
#: algorithm would keep every algorithm ever run (and its GPU memory) alive.
_last: dict = {}


def runtime(alg: ir.Algorithm, placement: str = "one-gpu", **options) -> DeviceRuntime:
    """The cached :class:`DeviceRuntime` of ``alg`` for these options."""
    key = (id(alg), placement, tuple(sorted((k, str(v)) for k, v in options.items())))
    rt = _last.get(key)
    if rt is None or rt.alg is not alg:
        _last.clear()
        rt = _last[key] = DeviceRuntime(alg, placement, **options)
    return rt


def run(alg: ir.Algorithm, inputs: list, op: str = "sum", inplace: bool | None = None,
        placement: str = "one-gpu", slice_elems: int | None = None,
        buffsize: int | None = None, dtype: str | None = None, watchdog: float = DEFAULT_WATCHDOG,
        threads: int | None = None, devices: list[int] | None = None,
        as_cupy: bool = False) -> list:
    """Run ``alg`` on GPUs through CuPy (reference.run's contract plus placement options).

    Without CuPy or a GPU this raises one MscclRuntimeError line.
    """
    if placement == "host":
        from msccl_py.runtime.cupy.host import run as host_run
        return host_run(alg, inputs, op, inplace=inplace, dtype=dtype, as_cupy=as_cupy)
    opts = {"buffsize": buffsize, "watchdog": watchdog, "threads": threads, "devices": devices}
    rt = runtime(alg, placement, **opts)
    t0 = time.perf_counter()
    out = rt.run(inputs, op, inplace, slice_elems, dtype, as_cupy)
    rt.last_call_s = time.perf_counter() - t0
    return out
