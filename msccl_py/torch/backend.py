"""The ``msccl`` torch.distributed backend: a Python ``ProcessGroup`` over the communicator.

``dist.init_process_group("msccl")`` (after ``import msccl_py.torch``)
calls :func:`create` on every rank with the launch's store; the ranks join
as :func:`msccl_py.init` joins (one shared arena per host, a gloo engine
between hosts) and each collective runs a library program on the shm
runtime, reading and writing the tensors' own memory. CUDA tensors go to
the CuPy IPC runtime (:mod:`.cuda`).

Every group has a name and a device as ``ProcessGroup`` expects: torch keeps
both on the group's backends, so the group's private gloo group is
registered as its backend for cpu and cuda. ``_get_backend(device)`` returns
it, and the few calls that torch's C++ side routes to a group's backend
rather than to the Python group (the functional ``all_gather_into_tensor``
and ``reduce_scatter_tensor``) run there, correctly, on gloo.

A call with ``async_op=True`` (``opts.asyncOp``, also set by C++ callers
such as DDP) runs on the group's progress thread (:mod:`.worker`) and
returns at once; a synchronous call runs in the caller's thread after the
queued ones. Reductions of dtypes and ops the communicator lacks are mapped
onto it in :mod:`.ops`. Errors are both msccl_py's and torch's
(:mod:`.errors`). Point-to-point ``send``/``recv`` use the group's gloo
group (the shm runtime's calls are collective).
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from msccl_py.comm.join import join
from msccl_py.comm.selector import Selector
from msccl_py.errors import MscclError
from msccl_py.runtime.communicator import Communicator
from msccl_py.torch import cuda, exchange, ops
from msccl_py.torch.errors import RefusedError, SizesError, translate
from msccl_py.torch.tensors import (HotViews, Staged, element_type_of, host_view, same_shape,
                                    units)
from msccl_py.torch.worker import Worker
from msccl_py.transport.engines import FRAME_TAG, GlooEngine, StoreBootstrap

NAME = "msccl"


def _root(opts) -> int:
    return 0 if opts is None else int(opts.rootRank)


class _Done(dist.Work):
    """The Work of a finished call: ``wait()`` returns at once and ``get_future()`` holds
    ``value`` (gloo's value for the same call). A Python Work costs a third of a Future
    wrapped by ``_create_work_from_future``, which small calls notice."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self):
        return None

    def result(self) -> list:
        return self._value if isinstance(self._value, list) else [self._value]

    def get_future(self) -> torch.futures.Future:
        fut = torch.futures.Future()
        fut.set_result(self._value)
        return fut


class ProcessGroupMSCCL(dist.ProcessGroup):
    """One rank's ``msccl`` process group (see the module docstring)."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        seconds = timeout.total_seconds()
        boot = StoreBootstrap(dist.PrefixStore("msccl_py/", store), rank, size)
        self.group = join(boot, lambda: GlooEngine.from_store(store, rank, size, seconds),
                          launch="torch.distributed", timeout=seconds, engine_always=True)
        self.comm = Communicator(self.group.runtime, selector=Selector(size, self.group.layout),
                                 group=self.group)
        self._gloo = self.group.engine.group
        for device in ("cpu", "cuda"):
            self._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM,
                                   self._gloo)
        self._device = None
        self._hot = HotViews()
        self._worker = Worker(f"rank{rank}")
        # small in-place all_reduce runs out of place from a private copy (faster); not
        # where an algorithm directory picks programs, whose rules tell in-place calls
        # from out-of-place ones
        self._stage_small = self.comm.selector.algo_dir is None
        from msccl_py.comm import debug
        debug.joined(self.group, size)

    def getBackendName(self) -> str:
        return NAME

    def __repr__(self) -> str:
        return f"ProcessGroupMSCCL(rank={self.rank()}, size={self.size()}, " \
               f"layout={self.group.layout.describe()!r})"

    def shutdown(self) -> None:
        self._worker.close()
        self.comm.close()

    def _issue(self, opts, what: str, call):
        """Run ``call`` (it returns the Work's value) now, or on the progress thread when
        the call is asynchronous (``opts.asyncOp``; no options: as C++ callers default)."""
        if opts is not None and not opts.asyncOp:
            try:
                return _Done(self._worker.inline(call))
            except MscclError as exc:
                raise translate(exc, self.comm._rt, what) from None
        return self._worker.submit(lambda: self._translated(call, what))

    def _translated(self, call, what: str):
        try:
            return call()
        except MscclError as exc:
            raise translate(exc, self.comm._rt, what) from None

    # ----- reductions and broadcast ----------------------------------------------------
    def allreduce(self, tensors, opts=None):
        if tensors and tensors[0].layout == torch.sparse_coo:
            return self._issue(opts, "all_reduce",
                               lambda: exchange.sparse_all_reduce(self.comm, tensors, opts))
        op, factor = ops.op_of(opts)
        if op not in _COMM_OPS:
            for t in tensors:
                ops.gathered(op, t.dtype)       # refuse before anything is queued
        return self._issue(opts, "all_reduce", lambda: self._allreduce_all(tensors, op, factor))

    def _allreduce_all(self, tensors, op: str, factor):
        for t in tensors:
            self._allreduce_one(t, op, factor)
        return tensors

    def _allreduce_one(self, t: torch.Tensor, op: str, factor) -> None:
        if t.dtype in _AS_IS and op in _COMM_OPS:      # the common case, without the mapping
            self._allreduce(t, op, hot=True)
            return
        if ops.gathered(op, t.dtype):
            with torch.no_grad():
                t.copy_(exchange.gathered_reduce(self.comm, t, op).view(t.shape))
            return
        with ops.reducible(t, op, factor) as (w, wop):
            self._allreduce(w, wop, hot=w is t)

    def _allreduce(self, t: torch.Tensor, op: str, hot: bool) -> None:
        view = self._hot.get(t) if hot else None
        if view is not None:
            src = self._hot.source(t) if self._stage_small else None
            self.comm.all_reduce(view if src is None else src, op, out=view)
        elif cuda.is_device(t):
            self._cuda().all_reduce(t, op)
        else:
            s = Staged(t)
            self.comm.all_reduce(s.array, op, out=s.array)
            s.commit()

    def allreduce_coalesced(self, tensors, opts=None):
        """gloo's semantics: each tensor reduced on its own (any sizes, one dtype); here one
        call on their concatenation."""
        if len({t.dtype for t in tensors}) > 1:
            raise RefusedError("allreduce_coalesced: the tensors must all have one dtype, got "
                               f"{sorted(str(t.dtype) for t in tensors)}")
        op, factor = ops.op_of(opts)
        for t in tensors[:1]:
            ops.gathered(op, t.dtype)

        def call():
            flat = torch.cat([t.detach().reshape(-1) for t in tensors])
            self._allreduce_one(flat, op, factor)
            at = 0
            with torch.no_grad():
                for t in tensors:
                    t.copy_(flat[at:at + t.numel()].view(t.shape))
                    at += t.numel()
            return tensors
        return self._issue(opts, "allreduce_coalesced", call)

    def broadcast(self, tensors, opts=None):
        root = _root(opts)

        def call():
            for t in tensors:
                if cuda.is_device(t):
                    self._cuda().broadcast(t, root)
                    continue
                s = Staged(t, read=self.rank() == root)
                self.comm.broadcast(s.array, root, out=s.array)
                s.commit()
            return tensors
        return self._issue(opts, "broadcast", call)

    def reduce(self, tensors, opts=None):
        (op, factor), root = ops.op_of(opts), _root(opts)
        for t in tensors:
            ops.gathered(op, t.dtype)

        def call():
            me = self.rank() == root
            for t in tensors:
                if ops.gathered(op, t.dtype):
                    r = exchange.gathered_reduce(self.comm, t, op)
                    if me:
                        with torch.no_grad():
                            t.copy_(r.view(t.shape))
                    continue
                with ops.reducible(t, op, factor, write=me) as (w, wop), \
                        cuda.staged(w, write=me) as host:
                    s = Staged(host)
                    self.comm.reduce(s.array, root, wop, out=s.array if me else None)
                    if me:
                        s.commit()
            return tensors
        return self._issue(opts, "reduce", call)

    # ----- gathering ------------------------------------------------------------------
    def allgather(self, output_tensors, input_tensors, opts=None):
        for outs, t in zip(output_tensors, input_tensors):
            same_shape([t, *outs], "all_gather")

        def call():
            for outs, t in zip(output_tensors, input_tensors):
                self._gather_into(outs, lambda x: self.comm.all_gather(x), t)
            return output_tensors[0] if len(output_tensors) == 1 else output_tensors
        return self._issue(opts, "all_gather", call)

    def all_gather_single(self, output, input, opts=None):
        if output.numel() != input.numel() * self.size():
            raise SizesError(f"all_gather_into_tensor: the output has {output.numel()} "
                             f"elements, not {self.size()} x {input.numel()}")
        return self._issue(opts, "all_gather_into_tensor",
                           lambda: self._all_gather_single(output, input))

    def _all_gather_single(self, output, input) -> list:
        if cuda.is_device(output):
            self._cuda().all_gather(output, input)
        else:
            src, dst = Staged(input), Staged(output, read=False)
            self.comm.all_gather(src.array, out=dst.array)
            dst.commit()
        # gloo's future holds the output's rank blocks (views), so this one does too
        return list(output.chunk(self.size()))

    _allgather_base = all_gather_single

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        """gloo's semantics: ``output_lists[r][j]`` gets rank r's ``input_tensors[j]`` (sizes
        may differ between j, one dtype); one all_gather of the inputs' concatenation."""
        if len({t.dtype for t in input_tensors}) > 1:
            raise RefusedError("all_gather_coalesced: the tensors must all have one dtype, "
                               f"got {sorted(str(t.dtype) for t in input_tensors)}")
        sizes = [t.numel() for t in input_tensors]
        if len(output_lists) != self.size() or any(
                [o.numel() for o in outs] != sizes for outs in output_lists):
            raise SizesError(f"all_gather_coalesced: the output must be {self.size()} lists of "
                             f"tensors of {sizes} elements (one list per rank)")

        def call():
            flat = torch.cat([t.detach().reshape(-1).cpu() for t in input_tensors]) \
                if input_tensors else torch.empty(0)
            got = self.comm.all_gather(host_view(flat)) if flat.numel() else None
            rows = torch.frombuffer(got, dtype=flat.dtype).view(self.size(), -1) \
                if got is not None and got.size else None
            with torch.no_grad():
                for r, outs in enumerate(output_lists):
                    at = 0
                    for o, k in zip(outs, sizes):
                        if k:
                            o.copy_(rows[r, at:at + k].view(o.shape))
                        at += k
            return output_lists
        return self._issue(opts, "all_gather_coalesced", call)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        def call():
            for o, i in zip(outputs, inputs):
                self._all_gather_single(o, i)
            return outputs
        return self._issue(opts, "all_gather_into_tensor_coalesced", call)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_tensors, input_tensors, opts=None):
        root = _root(opts)

        def call():
            for k, t in enumerate(input_tensors):
                outs = output_tensors[k] if self.rank() == root else []
                self._gather_into(outs, lambda x: self.comm.gather(x, root), t)
            return output_tensors[0] if output_tensors else []
        return self._issue(opts, "gather", call)

    def _gather_into(self, outs, call, t) -> None:
        with cuda.staged(t, write=False) as host:
            got = call(Staged(host).array)
        if got is None:
            return
        blocks = got.reshape(self.size(), -1)
        for k, o in enumerate(outs):
            with cuda.staged(o, read=False) as ho:
                d = Staged(ho, read=False)
                np.copyto(d.array, blocks[k])
                d.commit()

    # ----- scattering -----------------------------------------------------------------
    def scatter(self, output_tensors, input_tensors, opts=None):
        root = _root(opts)
        if self.rank() == root:
            for k, t in enumerate(output_tensors):
                same_shape([t, *input_tensors[k]], "scatter")

        def call():
            for k, t in enumerate(output_tensors):
                with cuda.staged(t, read=False) as host:
                    d = Staged(host, read=False)
                    if self.rank() == root:
                        x = np.concatenate([_host_array(i) for i in input_tensors[k]])
                    else:
                        x = np.empty(d.array.size * self.size(), dtype=d.array.dtype)
                    self.comm.scatter(x, root, out=d.array)
                    d.commit()
            return output_tensors
        return self._issue(opts, "scatter", call)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op, factor = ops.op_of(opts)
        for t, ins in zip(output_tensors, input_tensors):
            same_shape([t, *ins], "reduce_scatter")
            ops.gathered(op, t.dtype)

        def call():
            for t, ins in zip(output_tensors, input_tensors):
                self._reduce_scatter_one(t, torch.cat([i.detach().reshape(-1) for i in ins]),
                                         op, factor)
            return output_tensors
        return self._issue(opts, "reduce_scatter", call)

    def reduce_scatter_single(self, output, input, opts=None):
        if input.numel() != output.numel() * self.size():
            raise SizesError(f"reduce_scatter_tensor: the input has {input.numel()} elements, "
                             f"not {self.size()} x {output.numel()}")
        op, factor = ops.op_of(opts)
        ops.gathered(op, output.dtype)

        def call():
            self._reduce_scatter_one(output, input, op, factor)
            return [output]
        return self._issue(opts, "reduce_scatter_tensor", call)

    _reduce_scatter_base = reduce_scatter_single

    def _reduce_scatter_one(self, output, input, op: str, factor) -> None:
        if ops.gathered(op, output.dtype):
            mine = exchange.gathered_reduce(self.comm, input, op).view(self.size(),
                                                                       -1)[self.rank()]
            with torch.no_grad():
                output.copy_(mine.view(output.shape))
            return
        src, _ = ops.widened(input, op, factor)
        with ops.reducible(output, op, factor, read=False) as (w, wop):
            if w.dtype in _RING_ORDER and wop in ("sum", "avg") and not cuda.is_device(w):
                exchange.ring_order_reduce_scatter(self.comm, src, w, wop)
            elif cuda.is_device(w):
                self._cuda().reduce_scatter(w, src, wop)
            else:
                with cuda.staged(src, write=False) as hsrc:
                    s, d = Staged(hsrc), Staged(w, read=False)
                    self.comm.reduce_scatter(s.array, wop, out=d.array)
                    d.commit()

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        op, factor = ops.op_of(opts)

        def call():
            for o, i in zip(outputs, inputs):
                self._reduce_scatter_one(o, i, op, factor)
            return outputs
        return self._issue(opts, "reduce_scatter_tensor_coalesced", call)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ----- all-to-all -----------------------------------------------------------------
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        n = self.size()
        if not output_split_sizes and not input_split_sizes and (
                input.numel() % n or output.numel() != input.numel()):
            raise SizesError(f"all_to_all_single: {input.numel()} input and "
                             f"{output.numel()} output elements do not split into "
                             f"{n} equal blocks; pass split sizes")

        def call():
            with cuda.staged(input, write=False) as hin, \
                    cuda.staged(output, read=False) as hout:
                src, dst = Staged(hin), Staged(hout, read=False)
                if not output_split_sizes and not input_split_sizes:
                    self.comm.all_to_all(src.array, out=dst.array)
                else:
                    exchange.all_to_all_v(self.comm, src.array, dst.array,
                                          list(input_split_sizes), list(output_split_sizes),
                                          input, output)
                dst.commit()
            return [output]
        return self._issue(opts, "all_to_all_single", call)

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        dtypes = {t.dtype for t in [*output_tensors, *input_tensors]}
        if len(dtypes) != 1:
            raise RefusedError(f"all_to_all: tensors of several dtypes "
                               f"{sorted(map(str, dtypes))}")

        def call():
            x = np.concatenate([_host_array(t) for t in input_tensors])
            per = units(input_tensors[0].dtype)
            out = np.empty(sum(t.numel() for t in output_tensors) * per, dtype=x.dtype)
            exchange.all_to_all_v(self.comm, x, out, [t.numel() * per for t in input_tensors],
                                  [t.numel() * per for t in output_tensors], None, None)
            at = 0
            for t in output_tensors:
                k = t.numel() * per
                with cuda.staged(t, read=False) as host:
                    d = Staged(host, read=False)
                    np.copyto(d.array, out[at:at + k])
                    d.commit()
                at += k
            return output_tensors
        return self._issue(opts, "all_to_all", call)
    # ----- barrier and point to point ------------------------------------------------
    def barrier(self, opts=None):
        def call():
            self.comm.barrier()
            return []
        return self._issue(opts, "barrier", call)

    def send(self, tensors, dstRank: int, tag: int):
        _check_tag(tag)
        cpu = [_wire(t.detach().cpu().contiguous()) for t in tensors]
        return self._gloo.send(cpu, dstRank, tag)

    def recv(self, tensors, srcRank: int, tag: int):
        _check_tag(tag)
        return self._recv(tensors, lambda ts: self._gloo.recv(ts, srcRank, tag))

    def recv_anysource(self, tensors, tag: int):
        _check_tag(tag)
        return self._recv(tensors, lambda ts: self._gloo.recv_anysource(ts, tag))

    def _recv(self, tensors, post):
        if all(t.device.type == "cpu" and t.is_contiguous() for t in tensors):
            return post([_wire(t) for t in tensors])
        # a strided or device tensor receives through a host copy, so the call waits here
        tmp = [torch.empty(t.shape, dtype=t.dtype) for t in tensors]
        work = post([_wire(t) for t in tmp])
        work.wait()
        with torch.no_grad():
            for t, h in zip(tensors, tmp):
                t.copy_(h)
        return _Done(tensors)

    def _cuda(self):
        if self._device is None:
            self._device = cuda.DeviceCollectives(self.comm)
        return self._device


#: dtypes and ops the communicator reduces as they are
_AS_IS = (torch.float32, torch.float64, torch.int8, torch.int32, torch.int64, torch.uint8)
_COMM_OPS = ("sum", "avg", "prod", "min", "max")
#: dtypes whose SUM/AVG reduce_scatter adds in gloo's order
_RING_ORDER = (torch.float32, torch.float64)
#: dtypes gloo's send and recv take; the others travel as their bytes
_GLOO_WIRE = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int32, torch.int64, torch.bool)


def _wire(t: torch.Tensor) -> torch.Tensor:
    """Contiguous ``t`` as gloo's point-to-point calls take it (its bytes for other dtypes)."""
    return t if t.dtype in _GLOO_WIRE else t.view(-1).view(torch.uint8)


def _host_array(t: torch.Tensor) -> np.ndarray:
    host = t.detach().cpu() if t.device.type != "cpu" else t.detach()
    return host_view(host.contiguous())


def _check_tag(tag: int) -> None:
    if not 0 <= tag < FRAME_TAG:
        raise RefusedError(f"point-to-point tag {tag} is outside 0..{FRAME_TAG - 1} (the "
                           f"msccl backend's engine keeps the tags above for itself)")


def create(store, rank: int, size: int, timeout: timedelta) -> ProcessGroupMSCCL:
    """The creator ``Backend.register_backend`` calls on every rank of a new group."""
    element_type_of(torch.float32)   # the tables are importable before any group is made
    return ProcessGroupMSCCL(store, rank, size, timeout)


def register() -> None:
    """Make ``dist.init_process_group("msccl")`` (cpu and cuda tensors) create this group."""
    if NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(NAME, create, devices=["cpu", "cuda"])
