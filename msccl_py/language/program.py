"""MSCCLProgram: the program being written, its symbolic buffers and its trace.

>>> from msccl_py.topologies import fully_connected
>>> from msccl_py.language.collectives import AllGather
>>> with MSCCLProgram("ag", fully_connected(2), AllGather(2, 1, False), 1) as prog:
...     for r in range(2):
...         c = chunk(r, Buffer.input, 0)
...         _ = c.copy(r, Buffer.output, r)
...         _ = c.copy(1 - r, Buffer.output, r)
...     ok = Check()
>>> ok
True
"""

from __future__ import annotations

import gc
import sys

from msccl_py import collective_table, ir, toolchain
from msccl_py.compiler.lower import gc_resume
from msccl_py.compiler.trace import Op, Trace
from msccl_py.errors import MscclError, ProgramError, WrongResultError
from msccl_py.language.active import current as _curr
from msccl_py.language.active import stack as _stack
from msccl_py.language.buffer import Buffer, ThreadblockPolicy, buffer_key, buffer_label
from msccl_py.language.buffer import trace_key as _phys
from msccl_py.language.chunkref import ChunkRef
from msccl_py.language.call_site import caller


# the two buffers every rank has, bound once: an Enum member lookup costs a call
_IN, _OUT = Buffer.input, Buffer.output

#: collectives whose chunk layout is per-rank blocks: batched replication would
#: put an instance's chunks in another rank's block
_BLOCKED_COLLECTIVES = collective_table.PER_RANK_BLOCKS


class MSCCLProgram:
    """A collective algorithm under construction; use as a context manager.

    ``topo`` is a Topology, a topology name or a file path (None: no link
    checks); ``instances`` replicates the algorithm over disjoint sub-chunks;
    ``threadblock_policy=ThreadblockPolicy.manual`` takes ``sendtb``/``recvtb``
    from every operation; ``check_xml`` verifies the XML before it is written.

    >>> from msccl_py.language.collectives import AllToAll
    >>> with MSCCLProgram("a2a", None, AllToAll(2, 1, False), 2, protocol="LL") as prog:
    ...     for r in range(2):
    ...         for q in range(2):
    ...             _ = chunk(r, Buffer.input, q).copy(q, Buffer.output, r)
    >>> alg = prog.lower()
    >>> alg.nchunksperloop, alg.protocol
    (4, 'LL')
    """

    def __init__(self, name: str, topo, collective, instances: int, protocol: str = "Simple",
                 threadblock_policy: ThreadblockPolicy = ThreadblockPolicy.auto,
                 interleaved_replication: bool = True, instr_fusion: bool = True,
                 check_xml: bool = True, dependence_nop: bool = False):
        file, line = caller()
        if toolchain.innermost() is None:  # not under a command: maybe a plain `python prog.py`
            from msccl_py.language.script import begin_if_script
            begin_if_script(file)
        self.name = name
        self.topo = _resolve_topology(topo, file, line)
        self.collective = collective
        self.num_ranks = collective.num_ranks
        topo_n = _topo_size(self.topo)
        if topo_n is not None and topo_n < self.num_ranks:
            raise ProgramError(f"topology {getattr(self.topo, 'name', '?')!r} has {topo_n} GPUs "
                               f"but the collective has {self.num_ranks} ranks", file, line)
        if not isinstance(instances, int) or instances < 1:
            raise ProgramError(f"instances must be a positive integer, got {instances!r}",
                               file, line)
        if protocol not in ir.PROTOCOLS:
            raise ProgramError(f"unknown protocol {protocol!r}; use one of "
                               f"{', '.join(ir.PROTOCOLS)}", file, line)
        if (not interleaved_replication and instances > 1
                and collective.name in _BLOCKED_COLLECTIVES):
            raise ProgramError(
                f"interleaved_replication=False puts each instance in its own copy of the "
                f"buffer, which breaks {collective.name}'s per-rank block layout; use "
                f"interleaved_replication=True (the default) or instances=1", file, line)
        self.instances = instances
        self.protocol = protocol
        self.threadblock_policy = threadblock_policy
        self.interleaved_replication = interleaved_replication
        self.instr_fusion = instr_fusion
        self.check_xml = check_xml
        self.dependence_nop = dependence_nop
        self.file, self.line = file, line
        self.buffers = collective.init_buffers()
        if len(self.buffers) != self.num_ranks:
            raise ProgramError(f"{type(collective).__name__}.init_buffers() returned "
                               f"{len(self.buffers)} ranks, expected {self.num_ranks}", file, line)
        self._scratch: list[dict] = [{} for _ in range(self.num_ranks)]
        self.ops: list[Op] = []
        self._links_ok: set = set()
        from msccl_py.language.collectives import buffer_mapping
        mapping = buffer_mapping(collective)
        self._identity_map = mapping == "identity"
        #: the in-place mapping "output names input", inlined on hot paths
        self._output_is_input = mapping == "output_is_input"
        #: what the program's Check() calls found (captures keep it)
        self.log = toolchain.ProgramLog(name, self)
        self._held_report: list[str] = []  # Check() output inside the with-block
        #: the verifier's verdict on the last XML written (check_xml), else None
        self.verdict = None
        #: whether the last XML's result was judged right for the collective (None: not yet)
        self.judged: bool | None = None
        self._lowered: ir.Algorithm | None = None
        self._base: ir.Algorithm | None = None  # one instance of _lowered, when replicated
        self._lowered_at = -1
        self._artifact: tuple | None = None  # (request, artifact) of the last compile
        #: (len(ops), Judgement) of the last judging of this program: XML() then Check()
        #: judges once
        self._judgement: tuple = (-1, None)

    # -- context management -------------------------------------------------
    def __enter__(self) -> "MSCCLProgram":
        # The trace allocates hundreds of thousands of small acyclic objects; the
        # cyclic GC rescanning them costs a fifth of the tracing time.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        _stack.append(self)
        toolchain.register(self.log)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if _stack and _stack[-1] is self:
            _stack.pop()
        if getattr(self, "_gc_was_enabled", False):
            gc_resume()  # the program's objects join the old generation, unscanned
        self._release_report(exc)

    def _release_report(self, exc) -> None:
        """Where Check()'s held report goes once the block ends: after the error line.

        A refusal by XML() carries its own judgement; another msccl_py error
        gets the report as details; under a command the command shows it.
        """
        held, self._held_report = self._held_report, []
        if not held or isinstance(exc, WrongResultError):  # it says the same, and more
            return
        if isinstance(exc, MscclError):
            exc.details = (*exc.details, *held)
        elif toolchain.innermost() is None:
            from msccl_py.language.script import report
            report(held)

    # -- buffers -------------------------------------------------------------
    def _rank(self, rank, what: str, file, line) -> int:
        if type(rank) is int and 0 <= rank < self.num_ranks:
            return rank
        if file is None:
            file, line = caller()
        if not isinstance(rank, int) or not 0 <= rank < self.num_ranks:
            raise ProgramError(f"{what} rank {rank} but the program has {self.num_ranks} ranks "
                               f"(0..{self.num_ranks - 1})", file, line)
        return rank

    def create_scratch(self, rank: int, name) -> list:
        """The scratch buffer ``name`` on ``rank``, created empty if new."""
        key = buffer_key(name)
        bufs = self.buffers[rank]
        if key not in bufs:
            bufs[key] = []
            if key == "scratch":
                bufs[Buffer.scratch] = bufs[key]
            self._scratch[rank][key] = 0
        return bufs[key]

    def _storage(self, rank: int, buffer, file, line) -> list:
        if buffer is Buffer.input or buffer is Buffer.output:
            return self.buffers[rank][buffer]
        try:
            hash(buffer)
        except TypeError:
            raise ProgramError(f"unknown buffer {buffer!r}; use Buffer.input, Buffer.output, "
                               f"Buffer.scratch or a scratch name (any hashable value)",
                               file, line) from None
        return self.create_scratch(rank, buffer)

    def _slots(self, rank: int, buffer, index: int, size: int, file, line, grow=False) -> list:
        if ((buffer is Buffer.input or buffer is Buffer.output) and type(index) is int
                and type(size) is int and index >= 0 and size >= 1):
            store = self.buffers[rank][buffer]
            if index + size <= len(store):  # the common case, kept cheap
                return store
        if file is None:
            file, line = caller()
        store = self._storage(rank, buffer, file, line)
        if not isinstance(index, int) or not isinstance(size, int) or index < 0 or size < 1:
            raise ProgramError(f"bad chunk range index={index!r} size={size!r} on rank {rank} "
                               f"{buffer_label(buffer)}", file, line)
        end = index + size
        if end > len(store):
            if grow and not isinstance(buffer, Buffer) or grow and buffer is Buffer.scratch:
                store.extend([None] * (end - len(store)))
                key = buffer_key(buffer)
                self._scratch[rank][key] = max(self._scratch[rank][key], end)
            else:
                raise ProgramError(f"index {end - 1} is past the end of rank {rank}'s "
                                   f"{buffer_label(buffer)} buffer ({len(store)} chunks)",
                                   file, line)
        return store

    def _map(self, rank: int, buffer, index: int):
        """The storage ``buffer[index]`` names (the collective's in-place aliasing)."""
        if self._output_is_input:  # the base class's mapping, without the call
            return (Buffer.input if buffer is Buffer.output else buffer), index
        if self._identity_map:
            return buffer, index
        return self.collective.get_buffer_index(rank, buffer, index)

    def _map_dst(self, src_rank: int, dst_rank: int, buffer, index: int):
        """The storage a copy from ``src_rank`` names as ``dst_rank``'s ``buffer[index]``.

        As in MSCCLang, the destination maps through the collective's
        ``get_buffer_index`` with the *sending* rank first: in an in-place
        allgather, ``copy(r2, Buffer.input, 0)`` from r1 lands in r2's output
        slot of r1's chunk. The receiving rank's mapping then applies to what
        that names (the identity for every built-in collective).
        """
        if self._output_is_input or self._identity_map:
            return self._map(dst_rank, buffer, index)
        get = self.collective.get_buffer_index
        buffer, index = get(src_rank, buffer, index)
        return get(dst_rank, buffer, index)

    def get_ref(self, rank: int, buffer, index: int, size: int = 1) -> "ChunkRef":
        """A reference to ``size`` chunks at ``index`` of ``rank``'s ``buffer`` (empty or not)."""
        file, line = caller()
        self._rank(rank, "chunk on", file, line)
        buffer, index = self._map(rank, buffer, index)
        self._slots(rank, buffer, index, size, file, line)
        return ChunkRef(rank, buffer, index, size, self)

    def _record(self, kind: str, src: "ChunkRef", dst_rank: int, dst_buf, dst_idx: int,
                sendtb: int, recvtb: int, ch: int, file, line) -> None:
        self._append(kind, src.rank, _phys(src.buffer), src.index, dst_rank, _phys(dst_buf),
                     dst_idx, src.size, sendtb, recvtb, ch, file, line)

    def _append(self, kind: str, src_rank: int, src_buf, src_idx: int, dst_rank: int, dst_buf,
                dst_idx: int, size: int, sendtb: int, recvtb: int, ch: int, file, line) -> None:
        """Check the threadblock/channel arguments and add the operation to the trace."""
        if not (type(sendtb) is int and type(recvtb) is int and type(ch) is int
                and sendtb >= -1 and recvtb >= -1 and ch >= -1):
            for name, val in (("sendtb", sendtb), ("recvtb", recvtb), ("ch", ch)):
                if not isinstance(val, int) or val < -1:
                    raise ProgramError(f"{name}={val!r} must be -1 (unset) or a non-negative "
                                       f"integer", file, line)
        self.ops.append(Op(kind, src_rank, src_buf, src_idx, dst_rank, dst_buf, dst_idx, size,
                           sendtb, recvtb, ch, file, line))

    def _check_link(self, src: int, dst: int, file, line) -> None:
        if src == dst or self.topo is None:
            return
        pair = (src, dst)
        if pair in self._links_ok:  # programs reuse few pairs many times
            return
        if not self.topo.link(src, dst):
            raise _link_error(self.topo, src, dst, file, line)
        self._links_ok.add(pair)

    # -- results -----------------------------------------------------------------
    @property
    def check_results(self) -> list[bool]:
        """Each Check()'s outcome, in order."""
        return self.log.results

    @property
    def check_report(self) -> list[str]:
        """What the failing Check() calls reported, with their FILE:LINE."""
        return self.log.report

    def check(self) -> bool:
        """Run the collective's post-condition; wrong slots are reported on stderr.

        A failure adds a line with the caller's FILE:LINE and the first wrong
        chunk with the FILE:LINE of the DSL call that last wrote it (also kept
        in :attr:`check_report`). Inside the program's ``with`` block the
        report is held until the block ends, so that an error the program
        then meets (``XML()`` refusing it) is the first line printed.
        """
        j = self._judgement[1] if self._judgement[0] == len(self.ops) else None
        if j is None:
            j = toolchain.judge(self.recording())
            self._judgement = (len(self.ops), j)
        file, line = caller()
        lines = list(j.lines)
        if j.ok is None:  # nothing to judge by: not a failure of the program
            lines.append(f"{file}:{line}: Check(): {type(self.collective).__name__} defines "
                         f"no check()")
        elif j.ok:
            self._judged_at = len(self.ops)
        else:
            lines.append(f"{file}:{line}: Check() failed: {j.where()}")
            self.check_report.extend(lines)
        if j.ok is not None:
            self.check_results.append(j.ok)
        if self in _stack:
            self._held_report.extend(lines)
        elif lines:
            print("\n".join(lines), file=sys.stderr)
        return bool(j.ok)

    def postcondition(self, instances: int | None = None) -> dict:
        """What the compiled XML must leave in each output chunk, from the symbolic state.

        ``{(rank, "o", chunk): ((origin rank, origin chunk), ...)}`` in XML chunk
        numbering (instances replicate every chunk), for every output slot the
        program filled. Check() proves the symbolic state right; a verifier run
        against this mapping proves the lowering reproduces it. ``instances``
        overrides the program's own count (1: the base program).
        """
        return toolchain.postcondition(self.recording(), instances)

    def _trace(self) -> Trace:
        input_sizes, output_sizes = [], []
        for r in range(self.num_ranks):
            input_sizes.append(len(self.buffers[r][Buffer.input]))
            output_sizes.append(len(self.buffers[r][Buffer.output]))
        return Trace(self.name, self.collective.name, self.num_ranks, self.collective.inplace,
                     self.protocol, self.instances,
                     self.threadblock_policy == ThreadblockPolicy.manual,
                     self.interleaved_replication, self.instr_fusion, input_sizes, output_sizes,
                     [dict(s) for s in self._scratch], self.ops)

    def recording(self, call: tuple[str | None, int | None] = (None, None)
                  ) -> toolchain.Recording:
        """What the toolchain compiles: the trace so far and what judging it needs.

        ``call`` is the ``(file, line)`` a refusal points at (the ``XML()`` call).
        """
        lowered = self._lowered if self._lowered_at == len(self.ops) else None
        return toolchain.Recording(
            self._trace(), self.collective, self, self.buffers,
            [bufs[Buffer.output] for bufs in self.buffers], self._slot_key, buffer_label,
            self.log, self.file, self.line, call, self.dependence_nop,
            getattr(self, "_judged_at", -1) == len(self.ops), self._apart_in_place(),
            None if lowered is None else (lowered, self._base))

    def _slot_key(self, rank: int, buffer, index: int):
        """The trace's buffer key and index of the storage ``buffer[index]`` names."""
        try:
            buf, idx = self._map(rank, buffer, index)
        except Exception:  # a custom get_buffer_index that rejects this slot
            buf, idx = buffer, index
        return (_phys(buf) if isinstance(buf, (Buffer, str)) else buf), idx

    def lower(self) -> ir.Algorithm:
        """The lowered IR of the operations so far (cached until the next operation)."""
        if self._lowered is None or self._lowered_at != len(self.ops):
            self._lowered, self._base = toolchain.lower(self.recording())
            self._lowered_at = len(self.ops)
        return self._lowered

    def compile(self, target: str | None = None, force: bool = False,
                call: tuple[str | None, int | None] = (None, None)) -> toolchain.Artifact:
        """The toolchain's artifact of this program for ``target`` (see :func:`toolchain.compile`).

        Lowers once per trace, and keeps the last artifact until the program or
        the request changes; records the verdict and judgement on the program.
        """
        key = (len(self.ops), target, force, self.check_xml, self.dependence_nop)
        if self._artifact is not None and self._artifact[0] == key:
            return self._artifact[1]
        art = toolchain.compile(self.recording(call), target,
                                toolchain.Policy(verify=self.check_xml, force=force))
        if self._lowered_at != len(self.ops) and art.lowered is not None:
            self._lowered, self._base = art.lowered
            self._lowered_at = len(self.ops)
        self._remember(art, key)
        return art

    def _remember(self, art: toolchain.Artifact, key: tuple | None = None) -> None:
        """Keep what an artifact says about this program (a capture compiled it, too)."""
        if art.judged:
            self._judged_at = len(self.ops)
        if art.judgement is not None:
            self._judgement = (len(self.ops), art.judgement)
        self.judged = art.judged
        if self.check_xml:
            self.verdict = art.verdict
        if key is not None:
            self._artifact = (key, art)

    def generate_xml(self, target: str | None = None, force: bool = False) -> str:
        """The MSCCL XML text for ``target`` (default: the newer runtimes' dialect).

        Raises :class:`ProgramError` when the result is wrong for the collective
        (``force``: warns and writes it, with no verdict); says its notes on stderr.
        """
        art = self.compile(target, force, caller())
        if art.notes:
            print("\n".join(art.notes), file=sys.stderr)
        return art.text

    def _apart_in_place(self) -> bool:
        """An in-place collective whose input and output are separate storage on some rank."""
        if not self.collective.inplace or self._output_is_input:
            return False
        from msccl_py.language.collectives import AllGather, ReduceScatter
        if isinstance(self.collective, (AllGather, ReduceScatter)):
            return False  # aliased by a window, not by one list
        return any(b[Buffer.input] is not b[Buffer.output] for b in self.buffers)


def _resolve_topology(topo, file, line):
    if topo is None:
        return None
    if isinstance(topo, (str, bytes)) or hasattr(topo, "__fspath__"):
        from msccl_py import topologies
        try:
            return topologies.resolve(topo)
        except MscclError:
            raise
        except Exception as exc:  # a path that cannot be read, say
            raise ProgramError(f"cannot load topology {topo!r}: {exc}", file, line) from None
    return topo


def _topo_size(topo) -> int | None:
    if topo is None:
        return None
    try:
        return int(topo.num_nodes())
    except Exception:
        return None


def _link_error(topo, src: int, dst: int, file, line) -> ProgramError:
    from msccl_py.errors import LinkError
    name = getattr(topo, "name", None) or type(topo).__name__
    return LinkError(f"no link from rank {src} to rank {dst} in topology {name!r}", file, line)


# -- module-level DSL functions ----------------------------------------------------
def chunk(rank: int, buffer, index: int, size: int = 1) -> ChunkRef | None:
    """Reference to chunks of ``rank``'s ``buffer``; None when the first slot is empty.

    >>> from msccl_py.language.collectives import AllGather
    >>> with MSCCLProgram("ag", None, AllGather(2, 2, False), 1):
    ...     chunk(1, Buffer.input, 0, size=2), chunk(1, Buffer.output, 0)
    (ChunkRef(rank=1, buffer=input, index=0, size=2), None)
    """
    prog = _stack[-1] if _stack else _curr()
    if (type(rank) is int and 0 <= rank < prog.num_ranks and type(index) is int
            and size == 1 and index >= 0):
        # the common call, checked inline: one chunk of input or output (and _map inlined)
        if prog._output_is_input:
            if buffer is _OUT:
                buffer = _IN
        elif not prog._identity_map:
            buffer, index = prog.collective.get_buffer_index(rank, buffer, index)
        if buffer is _IN or buffer is _OUT:
            store = prog.buffers[rank][buffer]
            if type(index) is int and 0 <= index < len(store):
                return None if store[index] is None else ChunkRef(rank, buffer, index, 1, prog)
    else:
        prog._rank(rank, "chunk on", None, None)  # the location is found only for an error
        buffer, index = prog._map(rank, buffer, index)
    store = prog._slots(rank, buffer, index, size, None, None)
    if store[index] is None:
        return None
    return ChunkRef(rank, buffer, index, size, prog)


def create_scratch(rank: int, name) -> list:
    """Create the named scratch buffer ``name`` on ``rank`` (copies to a new name create it too).

    >>> from msccl_py.language.collectives import AllReduce
    >>> with MSCCLProgram("s", None, AllReduce(2, 1, True), 1):
    ...     create_scratch(0, "staging")
    []
    """
    prog = _curr()
    file, line = caller()
    prog._rank(rank, "scratch on", file, line)
    return prog.create_scratch(rank, name)


def Check() -> bool:
    """True when the current program computes its collective; reports wrong slots to stderr.

    As in msccl-tools it returns a bool; a failure also names this call's
    FILE:LINE and the DSL call that last wrote the first wrong chunk.

    >>> from msccl_py.language.collectives import Broadcast
    >>> with MSCCLProgram("bc", None, Broadcast(2, 1, False, root=0), 1):
    ...     _ = chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
    ...     Check()      # rank 1 never got the chunk (reported on stderr)
    False
    """
    return _curr().check()
