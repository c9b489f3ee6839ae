"""The communicator: MPI/NCCL-style collectives between processes, backed by the library.

:func:`launch` starts ``world_size`` rank processes, calls ``fn(comm, *args)``
in each and returns their return values in rank order. ``comm`` is a
:class:`Communicator`; each collective asks the selector handed in from above
(``msccl_py.launch`` and ``msccl_py.init`` give the library's) for a program,
compiles it once per process and runs it on the shared-memory runtime
(:mod:`msccl_py.runtime.shm_exec`). Without a selector or a program from it,
the built-in ones of :mod:`msccl_py.runtime.shm_fallback` run (``comm.fallbacks``
says why), unless ``programs="library-only"``, which raises. An in-place-only program serves an
out-of-place call through its out-of-place twin
(:func:`~msccl_py.runtime.shm_program.out_of_place`), so the input is not
copied first; passing ``out=x`` runs it in place.

Conventions (MPI/NCCL):

* Arrays are NumPy arrays of float16, float32, float64, int8, int32, int64,
  uint8, or bfloat16 bit patterns in ``V2`` arrays
  (:data:`msccl_py.runtime.bfloat16.BF16`), used flat in C order. Every rank
  passes the same count and dtype.
* Buffers split into contiguous blocks: with ``k = x.size // world_size``,
  rank ``r``'s share is elements ``[r*k, (r+1)*k)`` (reduce_scatter, scatter,
  all_to_all), and gather/all_gather concatenate blocks in rank order. The
  seed library's ``scatter`` hands out strided slices ``x[r::world_size]``
  instead; here rank r gets the contiguous block r.
* all_reduce, reduce and broadcast return ``x``'s shape; the others 1-D.
* reduce and gather results are defined on the root only: other ranks get
  ``None``. broadcast and scatter accept ``x=None`` on non-root ranks (count
  and dtype come from the root, like the seed); otherwise non-root ``x`` only
  gives shape and dtype.
* Every collective returns a new array, or into ``out=`` (right size and dtype). Sizes
  need not divide the program's chunk count: each block is padded and the result trimmed.
* ops: sum, prod, max, min, avg (avg = sum / world_size; integers truncate).

Failures: an exception in one rank makes :func:`launch` raise
:class:`~msccl_py.runtime.process_group.RankError` with that rank's error
and traceback; a dead rank, a stalled collective (``timeout`` seconds) or
mismatched calls (collective, count, dtype, op or root) raise
:class:`~msccl_py.errors.MscclRuntimeError` /
:class:`~msccl_py.errors.MscclDeadlockError` naming ranks and threadblocks.
No process or shared memory outlives :func:`launch`.

Start methods: ``fork`` (Linux default) allows closures; with ``spawn`` the function must
be picklable and the launching script guarded by ``if __name__ == "__main__":``.

>>> import numpy as np
>>> def work(comm, n):
...     return comm.all_reduce(np.full(n, comm.rank + 1.0))
>>> launch(work, 4, args=(3,))[0]                  # doctest: +SKIP
array([10., 10., 10.])
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from msccl_py.collective_table import KINDS, ROOTED as _ROOTED, having
from msccl_py.errors import MscclError, MscclRuntimeError, SizeError
from msccl_py.plan.contract import apply_avg, averages
from msccl_py.runtime import process_group as pg
from msccl_py.runtime import shm_fallback
from msccl_py.runtime.backends import communicators
from msccl_py.runtime.bfloat16 import BF16, from_float32, to_float32
from msccl_py.runtime.memory import check_fits, need_bytes
from msccl_py.runtime.shm import SUPPORTED_DTYPES
from msccl_py.runtime.shm_control import COLLECTIVES, DTYPES, OPS, bit
from msccl_py.runtime.shm_exec import RankRuntime
from msccl_py.runtime.shm_program import RankProgram, out_of_place, rank_program

PROGRAM_SOURCES = ("library", "builtin", "library-only")
#: element types: the shm runtime's, int8, and bfloat16 (bit patterns in ``V2`` arrays)
COMM_DTYPES = (*SUPPORTED_DTYPES, "int8", "bfloat16")
_SUPPORTED = {np.dtype(name) for name in SUPPORTED_DTYPES} | {np.dtype("int8"), BF16}
_DTYPE_CODE = {(BF16 if name == "bfloat16" else np.dtype(name)): code
               for code, name in enumerate(DTYPES) if name in COMM_DTYPES}
_COLL_CODE = {name: code for code, name in enumerate(COLLECTIVES)}
_OP_CODE = {name: code for code, name in enumerate(OPS)}
#: calls on at most this many bytes remember their arrays for a cheap repeat
_FAST_BYTES = 1 << 20
API_NAMES = {k.name: k.api_name for k in KINDS.values() if k.api_name}

# call geometry (msccl_py.collective_table): input split per rank, output joined per rank
_SPLITS, _JOINS, _ROOT_ONLY = (having(t) for t in ("splits", "joins", "root_only"))
_KEEPS_SHAPE = frozenset(KINDS) - _SPLITS - _JOINS


class ProgramChoice(tuple):
    """``(rank program, key)`` of a call, printed as the program that runs it.

    >>> ProgramChoice(None, 7, "allreduce_ring", {"channels": 2})
    allreduce_ring(channels=2)
    >>> prog, key = ProgramChoice(None, 7, "built-in ring", {}, "no library program")
    >>> key
    7
    """

    def __new__(cls, program: RankProgram, key: int, name: str, params: dict,
                fallback: str | None = None):
        self = super().__new__(cls, (program, key))
        self.name, self.params, self.fallback = name, params, fallback
        self.alg = None     # the ir.Algorithm, once compiled
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        why = f" (library not used: {self.fallback})" if self.fallback else ""
        return f"{self.name}({args}){why}"


class Communicator:
    """One rank's handle on the group (see the module docstring for conventions).

    ``programs``: ``library`` (library first, built-in fallback), ``builtin``
    (built-in only) or ``library-only`` (raise when the library fails).
    """

    def __init__(self, runtime: RankRuntime, programs: str = "library", *, selector=None,
                 group=None):
        if programs not in PROGRAM_SOURCES:
            raise MscclRuntimeError(f"unknown program source {programs!r}; use one of "
                                    f"{', '.join(PROGRAM_SOURCES)}")
        self._rt = runtime
        self.rank = runtime.rank
        self.world_size = runtime.world_size
        self.programs = programs
        #: picks library programs (``selector(collective, nbytes, root, itemsize, inplace)``,
        #: see msccl_py.comm.selector); None: ``library.select`` for one host
        self.selector = selector
        #: the joined launch this communicator belongs to (``msccl_py.init``), else None
        self.group = group
        self.fallbacks: dict[tuple, str] = {}
        self._chosen: dict[tuple, tuple[RankProgram, int]] = {}
        self._compiled: dict[tuple, tuple[RankProgram, int]] = {}
        self._shapes: dict[tuple, tuple] = {}
        self._twins: dict[int, tuple] = {}
        self._fast: dict[tuple, tuple] = {}
        self._runs: dict[int, tuple] = {}

    def __repr__(self) -> str:
        return f"Communicator(rank={self.rank}, world_size={self.world_size})"

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Leave a joined launch (every rank calls it; ``msccl_py.init`` also does at exit)."""
        if self.group is not None:
            self.group.close()

    @property
    def layout(self):
        """The hosts and their ranks (a joined launch's; one host otherwise)."""
        if self.group is not None:
            return self.group.layout
        from msccl_py.transport.layout import LaunchLayout
        return LaunchLayout.of(["localhost"] * self.world_size)

    @property
    def transports(self) -> list[str]:
        """``shm``, then the engine that carries connections between hosts, if any."""
        return self.group.transports if self.group is not None else ["shm"]

    # ----- program choice ----------------------------------------------------------------
    def program(self, collective: str, nbytes: int, root: int = 0, itemsize: int = 4,
                inplace: bool = False) -> "ProgramChoice":
        """Which program this rank uses for one call: ``(rank program, key)`` with its name.

        Prints as the library program and its parameters (or the built-in one
        and why the library's was not used); ``.name`` and ``.params`` say the
        same as data. ``itemsize`` and ``inplace`` matter to a selector that
        follows an algorithm directory's rules.
        """
        key = (collective, nbytes, root, itemsize, inplace)
        hit = self._chosen.get(key)
        if hit is None:
            hit = self._chosen[key] = self._choose(collective, nbytes, root, itemsize, inplace)
        return hit

    def _pick(self, collective: str, nbytes: int, root: int, itemsize: int, inplace: bool):
        if self.selector is None:
            raise MscclRuntimeError(f"rank {self.rank}: no program selector was given "
                                    "(msccl_py.launch and msccl_py.init give the library's; "
                                    "pass Communicator(..., selector=...))")
        return self.selector(collective, nbytes, root, itemsize, inplace)

    def _choose(self, collective: str, nbytes: int, root: int, itemsize: int,
                inplace: bool) -> tuple[RankProgram, int]:
        if self.programs != "builtin":
            try:
                pick = self._pick(collective, nbytes, root, itemsize, inplace)
                hit = self._compiled.get(pick.ident)
                alg = None
                if hit is None:
                    alg = pick.build()
                    hit = ProgramChoice(rank_program(alg, self.rank, self.world_size),
                                        zlib.crc32(repr(pick.ident).encode()), pick.name,
                                        pick.params)
                    _check_shape(collective, hit[0], self.world_size)
                    hit.alg = alg
                    self._compiled[pick.ident] = hit
                self.selector.chosen(self.rank, collective, nbytes, hit, hit.alg, pick.why)
                return hit
            except (MscclError, ImportError) as exc:
                if self.programs == "library-only":
                    raise
                self.fallbacks[(collective, nbytes, root)] = f"{type(exc).__name__}: {exc}"
        ident = ("builtin", collective, root)
        hit = self._compiled.get(ident)
        if hit is None:
            alg = shm_fallback.fallback(collective, self.world_size, root)
            why = self.fallbacks.get((collective, nbytes, root))
            hit = ProgramChoice(rank_program(alg, self.rank, self.world_size),
                                zlib.crc32(repr(ident).encode()), f"built-in {alg.name}",
                                {"root": root} if collective in _ROOTED else {}, why)
            hit.alg = alg
            self._compiled[ident] = hit
        if self.selector is not None:
            self.selector.chosen(self.rank, collective, nbytes, hit, hit.alg,
                                 f"built-in: {hit.fallback or 'programs=builtin'}")
        return hit

    # ----- the call path -----------------------------------------------------------------
    def _check(self, x: Any, what: str) -> np.ndarray:
        if not isinstance(x, np.ndarray):
            raise MscclRuntimeError(f"rank {self.rank}: {what} needs a NumPy array, got "
                                    f"{type(x).__name__}")
        if x.dtype not in _SUPPORTED:
            raise MscclRuntimeError(f"rank {self.rank}: {what}: dtype {x.dtype} is not "
                                    f"supported; use one of {', '.join(COMM_DTYPES)} "
                                    f"(bfloat16 as V2 bit patterns)")
        if x.ndim == 1 and x.flags.c_contiguous:
            return x      # the same object each call keeps the executor's view cache warm
        return np.ascontiguousarray(x).reshape(-1)

    def _root(self, root: int, what: str) -> int:
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or \
                not 0 <= root < self.world_size:
            raise MscclRuntimeError(f"rank {self.rank}: {what}: root {root!r} is not a rank "
                                    f"of {self.world_size}")
        return int(root)

    def _op(self, op: str, what: str) -> str:
        if op not in OPS:
            raise MscclRuntimeError(f"rank {self.rank}: {what}: unknown op {op!r}; use one "
                                    f"of {', '.join(OPS)}")
        return op

    def _from_root(self, collective: str, root: int) -> tuple[int, np.dtype]:
        """Count and dtype of the call from the root's descriptor (x=None on a non-root)."""
        rt = self._rt
        code = COLLECTIVES.index(collective)
        got: list = []

        def step() -> tuple[bool, bool]:
            d = rt.peer_descriptor_next(root)
            if d is not None:
                got.append(d)
            return bool(got), bool(got)

        rt.drive(step, lambda: f"{collective} on rank {self.rank} (x=None) waits for the root "
                               f"rank {root} to enter the call", lambda: bit(root))
        d = got[0]
        if d[0] != code or d[4] != root:
            from msccl_py.runtime.shm_control import describe
            raise MscclRuntimeError(f"mismatched collective calls at call #{rt.seq + 1}: rank "
                                    f"{self.rank} called {collective}(x=None, root={root}) but "
                                    f"the root rank {root} called {describe(d)}")
        return int(d[1]), BF16 if DTYPES[d[2]] == "bfloat16" else np.dtype(DTYPES[d[2]])

    def _shape(self, collective: str, count: int, dtype: np.dtype, root: int,
               what: str, inplace: bool = False) -> tuple:
        """Program and block geometry of one call signature (cached per signature)."""
        n = self.world_size
        blocked = collective in _SPLITS
        if blocked and count % n:
            raise SizeError(f"rank {self.rank}: {what}: {count} elements do not split into "
                            f"{n} equal blocks")
        k = count // n if blocked else count
        prog, key = self.program(collective, count * dtype.itemsize, root, dtype.itemsize,
                                 inplace)
        i_ch, o_ch = prog.chunks[0], prog.chunks[1]
        joins = collective in _JOINS
        # chunks per block of the call's data
        c = (i_ch // n if joins else o_ch) if blocked else i_ch
        S = -(-k // c) if c else 0
        res_len = n * k if joins else (k if blocked else count)
        check_fits(need_bytes([prog.chunks] * n, S, dtype.itemsize), f"rank {self.rank}: {what} "
                   f"of {count} {dtype} elements on {n} ranks")   # every rank's buffers
        geo = (prog, key, blocked, k, c, S, res_len)
        if len(self._shapes) > 1024:
            self._shapes.clear()
        self._shapes[(collective, count, dtype, root, inplace)] = geo
        return geo

    def _collective(self, collective: str, x: np.ndarray | None, out, op: str = "sum",
                    root: int = 0) -> np.ndarray | None:
        fast = self._fast.get((collective, op, root))
        if fast is not None and fast[0] is x and fast[1] is out:
            return self._repeat(fast)
        n = self.world_size
        what = API_NAMES.get(collective, collective)
        if x is None:
            count, dtype = self._from_root(collective, root)
            flat = None
        else:
            flat = self._check(x, what)
            count, dtype = flat.size, flat.dtype
        inplace = out is not None and out is x
        geo = self._shapes.get((collective, count, dtype, root, inplace))
        if geo is None:
            geo = self._shape(collective, count, dtype, root, what, inplace)
        prog, key, blocked, k, c, S, res_len = geo
        i_ch, o_ch, s_ch = prog.chunks
        shape = x.shape if (x is not None and collective in _KEEPS_SHAPE) else (res_len,)
        defined = collective not in _ROOT_ONLY or self.rank == root
        if out is not None and defined and (not isinstance(out, np.ndarray) or
                                            out.dtype != dtype or out.size != res_len):
            raise SizeError(f"rank {self.rank}: {what}: out= must be a {dtype} array of "
                            f"{res_len} elements")
        # input buffer (padded per block when S*c differs from the block length); an
        # in-place program gets its input copied straight into the output's window
        if prog.inplace_only and flat is not None and S * c == k:
            inp = flat
        elif flat is None:
            inp = np.zeros(i_ch * S, dtype=dtype)
        elif (S * c == k or S == 0) and not prog.writes_input:
            inp = flat
        else:
            blocks = n if blocked else 1
            inp = np.zeros((blocks, i_ch * S // blocks), dtype=dtype)
            inp[:, :k] = flat.reshape(blocks, k)
            inp = inp.reshape(-1)
        o_el = o_ch * S
        direct = (out is not None and defined and o_el == res_len and out.flags.c_contiguous)
        if direct:
            outbuf = out if out.ndim == 1 else out.reshape(-1)
        else:
            outbuf = np.empty(o_el, dtype=dtype)
        if inp is flat and not prog.inplace_only and np.shares_memory(inp, outbuf) and not (
                prog.inplace_ok and i_ch == o_ch and inp.size == outbuf.size and
                inp.__array_interface__["data"][0] == outbuf.__array_interface__["data"][0]):
            # out=x with a program not verified in place: keep the input intact
            inp = flat.copy()
        run, untouched = prog, ()
        if prog.inplace_only and not np.may_share_memory(inp, outbuf):
            twin = self._twin(prog)
            if twin is not None:
                run, untouched = twin   # reads the input where it is, writes the output
        rt = self._rt
        desc = (_COLL_CODE[collective], count, _DTYPE_CODE[dtype], _OP_CODE[op], root, key, 0)
        if S and inp is flat and (direct or out is None) and not run.inplace_only and \
                not untouched and op != "avg" and o_el == res_len and defined and \
                inp.nbytes + outbuf.nbytes <= _FAST_BYTES:
            # nothing of this small call is copied or trimmed: the same input (and out=)
            # next time repeat it (held here, so their identity is safe); without out=
            # every repeat gets a fresh output array
            if len(self._fast) > 64:
                self._fast.clear()
            fresh = out is None
            self._fast[(collective, op, root)] = (x, out, desc, rt.bind(
                run, [inp, outbuf, rt.scratch(dtype, s_ch * S)], S, dtype, op, desc,
                fresh_output=fresh), shape if fresh and shape != outbuf.shape else None)
            return self._repeat(self._fast[(collective, op, root)])
        rt.enter(desc)
        try:
            if S:
                if run.inplace_only:
                    bufs = self._inplace(prog, inp, outbuf, S)
                else:
                    bufs = [inp, outbuf]
                bufs.append(rt.scratch(dtype, s_ch * S))
                rt.execute(run, bufs, S, dtype, op)
                if bufs[1] is not outbuf:
                    np.copyto(outbuf, bufs[1])
                for chunk in untouched:
                    outbuf[chunk * S:(chunk + 1) * S] = inp[chunk * S:(chunk + 1) * S]
        finally:
            rt.leave()
        if not defined:
            return None
        if o_el == res_len:
            res = outbuf
        else:
            blocks = n if collective in _JOINS else 1
            res = outbuf.reshape(blocks, o_el // blocks)[:, :res_len // blocks].reshape(-1)
        if averages(collective, op):
            if res.dtype == BF16:
                from_float32(to_float32(res) / np.float32(n), out=res)
            else:
                apply_avg(res, n)
        if out is not None:
            if res is not outbuf or not direct:
                np.copyto(out.reshape(-1), res)
            return out
        return res.reshape(shape)

    def _repeat(self, fast: tuple) -> np.ndarray:
        """A call whose buffers go to the executor as they are (see ``_collective``)."""
        res = fast[3]()       # enters, runs and leaves the call
        if fast[1] is not None:
            return fast[1]
        return res if fast[4] is None else res.reshape(fast[4])

    def _twin(self, prog: RankProgram) -> tuple[RankProgram, list[int]] | None:
        """The out-of-place twin of an in-place-only program (cached; None if it has none)."""
        hit = self._twins.get(id(prog))
        if hit is None or hit[0] is not prog:
            hit = self._twins[id(prog)] = (prog, out_of_place(prog))
        return hit[1]

    def _inplace(self, prog: RankProgram, inp: np.ndarray, outbuf: np.ndarray,
                 S: int) -> list[np.ndarray]:
        """Input and output aliased as an in-place-only program needs."""
        i_ch, o_ch = prog.chunks[0], prog.chunks[1]
        if i_ch == o_ch:
            if not np.shares_memory(outbuf, inp):
                np.copyto(outbuf, inp)
            return [outbuf, outbuf]
        if o_ch > i_ch:
            window = outbuf[self.rank * i_ch * S:(self.rank + 1) * i_ch * S]
            np.copyto(window, inp)
            return [window, outbuf]
        big = inp.copy()
        return [big, big[self.rank * o_ch * S:(self.rank + 1) * o_ch * S]]

    # ----- the API -----------------------------------------------------------------------
    def run(self, alg, bufs: list[np.ndarray], chunk_elems: int, op: str = "sum") -> None:
        """Run this rank's share of any algorithm ``alg`` once, as one call of the group:
        ``bufs`` are this rank's input, output and scratch (1-D, one dtype, any may alias),
        chunks of ``chunk_elems`` elements. Every rank calls it with the same algorithm.

        >>> comm.run(alg, [x, out, scratch], x.size // alg.nchunksperloop)   # doctest: +SKIP
        """
        hit = self._runs.get(id(alg))
        if hit is None or hit[0] is not alg:
            prog = rank_program(alg, self.rank, self.world_size)
            hit = self._runs[id(alg)] = (alg, prog, zlib.crc32(alg.name.encode()))
        _, prog, key = hit
        dtype = bufs[0].dtype
        rt = self._rt
        rt.enter((_COLL_CODE["run"], int(chunk_elems), _DTYPE_CODE[dtype], _OP_CODE[op], 0, key,
                  0))
        try:
            rt.execute(prog, bufs, int(chunk_elems), dtype, op)
        finally:
            rt.leave()

    def transport_stats(self) -> dict:
        """What crossed hosts from this rank: ``{"engine", "transfers", "bytes"}`` (zeros on
        one host)."""
        link = self.group.link if self.group is not None else None
        if link is None:
            return {"engine": None, "transfers": 0, "bytes": 0}
        return {"engine": self.group.engine.name, "transfers": link.transfers_sent,
                "bytes": link.bytes_sent}

    def barrier(self) -> None:
        """Block until every rank has called barrier.

        >>> comm.barrier()          # doctest: +SKIP
        """
        rt = self._rt
        rt.enter((0, 0, 0, 0, 0, 0, 0))
        try:
            rt.barrier()
        finally:
            rt.leave()

    def all_reduce(self, x: np.ndarray, op: str = "sum", *, out: np.ndarray | None = None
                   ) -> np.ndarray:
        """Element-wise reduction of every rank's ``x``, on every rank.

        >>> comm.all_reduce(np.ones(4), op="sum")      # doctest: +SKIP
        array([4., 4., 4., 4.])
        """
        return self._collective("allreduce", x, out, self._op(op, "all_reduce"))

    def reduce(self, x: np.ndarray, root: int = 0, op: str = "sum", *,
               out: np.ndarray | None = None) -> np.ndarray | None:
        """Element-wise reduction onto ``root`` (other ranks get None).

        >>> comm.reduce(np.ones(2), root=0)            # doctest: +SKIP
        array([4., 4.])
        """
        return self._collective("reduce", x, out, self._op(op, "reduce"),
                                self._root(root, "reduce"))

    def broadcast(self, x: np.ndarray | None, root: int = 0, *,
                  out: np.ndarray | None = None) -> np.ndarray:
        """``root``'s ``x`` on every rank (non-roots may pass None).

        >>> comm.broadcast(np.arange(3.) if comm.rank == 0 else None, root=0)  # doctest: +SKIP
        array([0., 1., 2.])
        """
        return self._collective("broadcast", x, out, "sum", self._root(root, "broadcast"))

    def reduce_scatter(self, x: np.ndarray, op: str = "sum", *,
                       out: np.ndarray | None = None) -> np.ndarray:
        """Block ``rank`` of the element-wise reduction (``x.size`` splits into world_size blocks).

        >>> comm.reduce_scatter(np.ones(8))            # doctest: +SKIP
        array([4., 4.])
        """
        return self._collective("reduce_scatter", x, out, self._op(op, "reduce_scatter"))

    def all_gather(self, x: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """Every rank's ``x`` concatenated in rank order, on every rank.

        >>> comm.all_gather(np.array([comm.rank]))     # doctest: +SKIP
        array([0, 1, 2, 3])
        """
        return self._collective("allgather", x, out)

    def all_to_all(self, x: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """Block j of ``x`` goes to rank j; the result is rank order of received blocks.

        >>> comm.all_to_all(np.arange(4) + 10 * comm.rank)   # doctest: +SKIP
        array([ 0, 10, 20, 30])
        """
        return self._collective("alltoall", x, out)

    def gather(self, x: np.ndarray, root: int = 0, *, out: np.ndarray | None = None
               ) -> np.ndarray | None:
        """Every rank's ``x`` concatenated in rank order on ``root`` (others get None).

        >>> comm.gather(np.array([comm.rank]), root=0)  # doctest: +SKIP
        array([0, 1, 2, 3])
        """
        return self._collective("gather", x, out, "sum", self._root(root, "gather"))

    def scatter(self, x: np.ndarray | None, root: int = 0, *,
                out: np.ndarray | None = None) -> np.ndarray:
        """Contiguous block ``rank`` of ``root``'s ``x`` (non-roots may pass None).

        >>> comm.scatter(np.arange(8) if comm.rank == 0 else None)   # doctest: +SKIP
        array([0, 1])
        """
        return self._collective("scatter", x, out, "sum", self._root(root, "scatter"))


def _check_shape(collective: str, prog: RankProgram, n: int) -> None:
    """Reject a library program whose buffers do not have the collective's shape."""
    i_ch, o_ch = prog.chunks[0], prog.chunks[1]
    ok = {"allgather": o_ch == n * i_ch, "gather": o_ch == n * i_ch,
          "reduce_scatter": i_ch == n * o_ch, "scatter": i_ch == n * o_ch,
          "alltoall": i_ch == o_ch and i_ch % n == 0}.get(collective, i_ch == o_ch)
    if not ok or i_ch == 0:
        raise MscclRuntimeError(f"program {prog.name} has {i_ch} input and {o_ch} output "
                                f"chunks, which is not the shape of {collective} on {n} ranks")


def _rank_main(rt: RankRuntime, conn, fn: Callable, args: tuple, programs: str,
               selector: Callable[[int], Any] | None) -> Any:
    chooser = selector(rt.world_size) if selector is not None else None
    return fn(Communicator(rt, programs, selector=chooser), *args)


def launch(fn: Callable, world_size: int, backend: str = "shm", args: Sequence = (), *,
           timeout: float | None = None, start_method: str | None = None,
           buffsize: int | None = None, programs: str = "library",
           grace: float = pg.DEFAULT_GRACE,
           selector: Callable[[int], Any] | None = None) -> list:
    """Run ``fn(comm, *args)`` in ``world_size`` processes; their return values in rank order.

    ``selector``: called with the world size in each rank, it returns what picks
    each call's program (``msccl_py.launch`` passes the library's,
    :class:`msccl_py.comm.selector.Selector`); without one every call runs the
    built-in programs.
    ``timeout``: seconds a collective may make no progress before every rank
    raises (default ``MSCCL_PY_TIMEOUT`` or 60). ``grace``: seconds the other
    ranks get to stop after one fails before they are killed.

    >>> def work(comm):
    ...     return comm.rank
    >>> launch(work, 2)                            # doctest: +SKIP
    [0, 1]
    """
    if backend != "shm":   # the others' launch is theirs (runtime.backends.launcher)
        raise MscclRuntimeError(f"unknown backend {backend!r}; the communicator runs on "
                                f"{' or '.join(map(repr, communicators()))}"
                                + (f" (start {backend!r} with msccl_py.launch)"
                                   if backend in communicators() else ""))
    if programs not in PROGRAM_SOURCES:
        raise MscclRuntimeError(f"unknown program source {programs!r}; use one of "
                                f"{', '.join(PROGRAM_SOURCES)}")
    group = pg.ProcessGroup(world_size, start_method=start_method,
                            buffsize=int(buffsize or pg.DEFAULT_BUFFSIZE),
                            timeout=float(timeout or pg.DEFAULT_TIMEOUT), grace=grace)
    try:
        group.start(_rank_main, (fn, tuple(args), programs, selector))
        return group.wait()
    finally:
        group.close()
