"""The ``msccl`` torch.distributed backend: a Python ``ProcessGroup`` over the communicator.

``dist.init_process_group("msccl")`` (after ``import msccl_py.torch``)
calls :func:`create` on every rank with the launch's store; the ranks join
as :func:`msccl_py.init` joins (one shared arena per host, a gloo engine
between hosts) and each collective runs a library program on the shm
runtime, reading and writing the tensors' own memory. CUDA tensors go to
the CuPy IPC runtime (:mod:`.cuda`).

SUM, AVG and PRODUCT of float16 and bfloat16 tensors reduce in float32 and
round once at the end (a product of 4 bfloat16 values rounded at each step
can end over 1% from the exact one, as gloo's does).

Collectives run when called, in the caller's thread; the Work they return
is complete, so ``wait()`` returns at once and ``get_future()`` holds the
outputs, as gloo's do once finished. Point-to-point ``send``/``recv`` use
the group's gloo engine (the shm runtime's calls are collective).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from msccl_py.comm.join import join
from msccl_py.comm.selector import Selector
from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.runtime.communicator import Communicator
from msccl_py.torch import cuda
from msccl_py.torch.tensors import HotViews, Staged, as_array, element_type_of, same_shape
from msccl_py.transport.engines import FRAME_TAG, GlooEngine, StoreBootstrap

NAME = "msccl"
_RED = dist.ReduceOp.RedOpType
#: keyed by the enum's value: hashing the pybind enum itself costs several microseconds
_OPS = {int(_RED.SUM): "sum", int(_RED.AVG): "avg", int(_RED.PRODUCT): "prod",
        int(_RED.MIN): "min", int(_RED.MAX): "max"}


def _op(opts) -> str:
    if opts is None:
        return "sum"
    red = opts.reduceOp.op
    name = _OPS.get(red.value)
    if name is None:
        raise MscclRuntimeError(f"the msccl backend does not implement {red.name}; it reduces "
                                f"with SUM, AVG, PRODUCT, MIN and MAX")
    return name


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


_done = _Done


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
        self._device = None
        self._hot = HotViews()
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
        self.comm.close()

    # ----- reductions and broadcast ----------------------------------------------------
    def allreduce(self, tensors, opts=None):
        op = _op(opts)
        for t in tensors:
            if t.dtype in _NARROW:
                with _wide(t, op) as w:
                    self._allreduce(w, op, hot=w is t)
            else:
                self._allreduce(t, op, hot=True)
        return _done(tensors)

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
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts=None):
        for t in tensors:
            if cuda.is_device(t):
                self._cuda().broadcast(t, _root(opts))
                continue
            s = Staged(t, read=self.rank() == _root(opts))
            self.comm.broadcast(s.array, _root(opts), out=s.array)
            s.commit()
        return _done(tensors)

    def reduce(self, tensors, opts=None):
        op, root = _op(opts), _root(opts)
        for t in tensors:
            with _wide(t, op, write=self.rank() == root) as w, cuda.staged(w) as host:
                s = Staged(host)
                self.comm.reduce(s.array, root, op, out=s.array if self.rank() == root else None)
                s.commit()
        return _done(tensors)

    # ----- gathering ------------------------------------------------------------------
    def allgather(self, output_tensors, input_tensors, opts=None):
        for outs, t in zip(output_tensors, input_tensors):
            same_shape([t, *outs], "all_gather")
            self._gather_into(outs, lambda x: self.comm.all_gather(x), t)
        return _done(output_tensors[0] if len(output_tensors) == 1 else output_tensors)

    def all_gather_single(self, output, input, opts=None):
        if output.numel() != input.numel() * self.size():
            raise SizeError(f"all_gather_into_tensor: the output has {output.numel()} elements, "
                            f"not {self.size()} x {input.numel()}")
        if cuda.is_device(output):
            self._cuda().all_gather(output, input)
        else:
            src, dst = Staged(input), Staged(output, read=False)
            self.comm.all_gather(src.array, out=dst.array)
            dst.commit()
        # gloo's future holds the output's rank blocks (views), so this one does too
        return _done(list(output.chunk(self.size())))

    _allgather_base = all_gather_single

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        return self.allgather(output_lists, input_tensors, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self.all_gather_single(o, i, opts)
        return _done(outputs)

    def gather(self, output_tensors, input_tensors, opts=None):
        root = _root(opts)
        for k, t in enumerate(input_tensors):
            outs = output_tensors[k] if self.rank() == root else []
            self._gather_into(outs, lambda x: self.comm.gather(x, root), t)
        return _done(output_tensors[0] if output_tensors else [])

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
        for k, t in enumerate(output_tensors):
            with cuda.staged(t, read=False) as host:
                d = Staged(host, read=False)
                if self.rank() == root:
                    ins = input_tensors[k]
                    same_shape([t, *ins], "scatter")
                    x = np.concatenate([_host_array(i) for i in ins])
                else:
                    x = np.empty(d.array.size * self.size(), dtype=d.array.dtype)
                self.comm.scatter(x, root, out=d.array)
                d.commit()
        return _done(output_tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = _op(opts)
        for t, ins in zip(output_tensors, input_tensors):
            same_shape([t, *ins], "reduce_scatter")
            with _wide(t, op, read=False) as w, cuda.staged(w, read=False) as host:
                d = Staged(host, read=False)
                x = np.concatenate([_host_array(_widened(i, op)) for i in ins])
                self.comm.reduce_scatter(x, op, out=d.array)
                d.commit()
        return _done(output_tensors)

    def reduce_scatter_single(self, output, input, opts=None):
        if input.numel() != output.numel() * self.size():
            raise SizeError(f"reduce_scatter_tensor: the input has {input.numel()} elements, "
                            f"not {self.size()} x {output.numel()}")
        op = _op(opts)
        with _wide(output, op, read=False) as w:
            self._reduce_scatter(w, _widened(input, op), op)
        return _done([output])

    def _reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op: str) -> None:
        if cuda.is_device(output):
            self._cuda().reduce_scatter(output, input, op)
        else:
            src, dst = Staged(input), Staged(output, read=False)
            self.comm.reduce_scatter(src.array, op, out=dst.array)
            dst.commit()

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs,
                                        opts=None):
        for o, i in zip(outputs, inputs):
            self.reduce_scatter_single(o, i, opts)
        return _done(outputs)

    # ----- all-to-all -----------------------------------------------------------------
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        n = self.size()
        with cuda.staged(input, write=False) as hin, cuda.staged(output, read=False) as hout:
            src, dst = Staged(hin), Staged(hout, read=False)
            if not output_split_sizes and not input_split_sizes:
                if input.numel() % n or output.numel() != input.numel():
                    raise SizeError(f"all_to_all_single: {input.numel()} input and "
                                    f"{output.numel()} output elements do not split into "
                                    f"{n} equal blocks; pass split sizes")
                self.comm.all_to_all(src.array, out=dst.array)
            else:
                self._all_to_all_v(src.array, dst.array, list(input_split_sizes),
                                   list(output_split_sizes), input, output)
            dst.commit()
        return _done([output])

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        dtypes = {t.dtype for t in [*output_tensors, *input_tensors]}
        if len(dtypes) != 1:
            raise MscclRuntimeError(f"all_to_all: tensors of several dtypes "
                                    f"{sorted(map(str, dtypes))}")
        x = np.concatenate([_host_array(t) for t in input_tensors])
        out = np.empty(sum(t.numel() for t in output_tensors), dtype=x.dtype)
        self._all_to_all_v(x, out, [t.numel() for t in input_tensors],
                           [t.numel() for t in output_tensors], None, None)
        at = 0
        for t in output_tensors:
            with cuda.staged(t, read=False) as host:
                d = Staged(host, read=False)
                np.copyto(d.array, out[at:at + t.numel()])
                d.commit()
            at += t.numel()
        return _done(output_tensors)

    def _all_to_all_v(self, x: np.ndarray, out: np.ndarray, in_splits: list[int],
                      out_splits: list[int], t_in, t_out) -> None:
        """Uneven blocks: every rank's splits are exchanged (one small all_gather), checked
        against each other, and the blocks padded to the largest. Splits that are wrong
        on one rank make every rank raise (after the exchange), so none waits for it."""
        n, me = self.size(), self.rank()
        (row_in, rows_in), (row_out, rows_out) = _rows(t_in, x.size), _rows(t_out, out.size)
        ins = list(in_splits) or [rows_in // n] * n
        outs = list(out_splits) or [rows_out // n] * n
        problem = None
        if row_in != row_out:
            problem = f"input rows of {row_in} and output rows of {row_out} elements"
        elif len(ins) != n or len(outs) != n or sum(ins) != rows_in or sum(outs) != rows_out:
            problem = (f"split sizes {ins} / {outs} do not describe {x.size} input and "
                       f"{out.size} output elements in {n} blocks")
        mine = np.zeros(2 * n + 1, dtype=np.int64)
        if problem is None:
            mine[1:] = ins + outs
        else:
            mine[0] = 1
        table = self.comm.all_gather(mine).reshape(n, 2 * n + 1)
        if problem is not None:
            raise SizeError(f"all_to_all on rank {me}: {problem}")
        bad = [q for q in range(n) if table[q, 0]]
        if bad:
            raise SizeError(f"all_to_all: rank(s) {bad} passed split sizes that do not describe "
                            f"their tensors")
        sends, recvs = table[:, 1:n + 1], table[:, n + 1:]
        for q in range(n):
            if recvs[q].tolist() != sends[:, q].tolist():
                raise SizeError(f"all_to_all on rank {q}: output split sizes "
                                f"{recvs[q].tolist()} but the ranks send "
                                f"{sends[:, q].tolist()} rows")
        table = sends
        m = int(table.max()) * row_in
        padded = np.zeros(n * m, dtype=x.dtype)
        at = 0
        for j, k in enumerate(ins):
            padded[j * m:j * m + k * row_in] = x[at:at + k * row_in]
            at += k * row_in
        got = self.comm.all_to_all(padded) if m else padded
        at = 0
        for j, k in enumerate(outs):
            out[at:at + k * row_out] = got[j * m:j * m + k * row_out]
            at += k * row_out

    # ----- barrier and point to point ------------------------------------------------
    def barrier(self, opts=None):
        self.comm.barrier()
        return _done([])

    def send(self, tensors, dstRank: int, tag: int):
        _check_tag(tag)
        cpu = [t.detach().cpu().contiguous() for t in tensors]
        return self._gloo.send(cpu, dstRank, tag)

    def recv(self, tensors, srcRank: int, tag: int):
        _check_tag(tag)
        return self._recv(tensors, lambda ts: self._gloo.recv(ts, srcRank, tag))

    def recv_anysource(self, tensors, tag: int):
        _check_tag(tag)
        return self._recv(tensors, lambda ts: self._gloo.recv_anysource(ts, tag))

    def _recv(self, tensors, post):
        if all(t.device.type == "cpu" and t.is_contiguous() for t in tensors):
            return post(tensors)
        # a strided or device tensor receives through a host copy, so the call waits here
        tmp = [torch.empty(t.shape, dtype=t.dtype) for t in tensors]
        work = post(tmp)
        work.wait()
        with torch.no_grad():
            for t, h in zip(tensors, tmp):
                t.copy_(h)
        return _done(tensors)

    def _cuda(self):
        if self._device is None:
            self._device = cuda.DeviceCollectives(self.comm)
        return self._device


#: 16-bit floats whose arithmetic reductions run in float32, rounded once at the end
_NARROW = (torch.float16, torch.bfloat16)
_ARITH = ("sum", "avg", "prod")


def _widened(t: torch.Tensor, op: str) -> torch.Tensor:
    """``t`` as float32 when its reduction is widened (see :func:`_wide`), else ``t``."""
    return t.float() if t.dtype in _NARROW and op in _ARITH else t


@contextlib.contextmanager
def _wide(t: torch.Tensor, op: str, read: bool = True, write: bool = True):
    """A float32 copy of a float16/bfloat16 ``t`` for SUM, AVG and PRODUCT, written back
    rounded (``write``); else ``t`` itself.

    Each step of a program rounds its partial result to the element type; in
    bfloat16 (8 significant bits) a product of 4 ranks can end 2 units in the
    last place from the exact one (over 1%, as gloo does). Reducing in float32
    and rounding once keeps the result within rounding of the exact one, at
    twice the bytes moved.
    """
    if t.dtype not in _NARROW or op not in _ARITH:
        yield t
        return
    w = t.detach().float() if read else torch.empty(t.shape, dtype=torch.float32,
                                                    device=t.device)
    yield w
    if write:
        with torch.no_grad():
            t.copy_(w)


def _host_array(t: torch.Tensor) -> np.ndarray:
    host = t.detach().cpu() if t.device.type != "cpu" else t.detach()
    return as_array(host.contiguous())


def _rows(t, size: int) -> tuple[int, int]:
    """Elements per row of dim 0 and the number of rows, which split sizes count (a list
    of tensors, or a 0-dim tensor: rows of one element)."""
    if t is None or t.dim() == 0:
        return 1, size
    n = t.shape[0]
    return (size // n if n else 1), n


def _check_tag(tag: int) -> None:
    if not 0 <= tag < FRAME_TAG:
        raise MscclRuntimeError(f"point-to-point tag {tag} is outside 0..{FRAME_TAG - 1} (the "
                                f"msccl backend's engine keeps the tags above for itself)")


def create(store, rank: int, size: int, timeout: timedelta) -> ProcessGroupMSCCL:
    """The creator ``Backend.register_backend`` calls on every rank of a new group."""
    element_type_of(torch.float32)   # the tables are importable before any group is made
    return ProcessGroupMSCCL(store, rank, size, timeout)


def register() -> None:
    """Make ``dist.init_process_group("msccl")`` (cpu and cuda tensors) create this group."""
    if NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(NAME, create, devices=["cpu", "cuda"])
