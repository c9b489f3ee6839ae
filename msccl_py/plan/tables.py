"""Execution plan: an ``ir.Algorithm`` flattened into NumPy tables every runtime consumes.

Built once per algorithm by :func:`plan_for` and cached (see *Caching*). All
tables are C-contiguous ``np.int64`` 2-D arrays indexed ``[row, COLUMN]`` with
the column constants below; ``-1`` means "none". Columns may be appended in
later versions, never reordered.

Codes
    ``OP_*``: ``OP_SEND=0 s, OP_RECV=1 r, OP_RCS=2 rcs, OP_RRS=3 rrs, OP_RRC=4 rrc,
    OP_RRCS=5 rrcs, OP_COPY=6 cpy, OP_REDUCE=7 re`` (``OP_NAMES[code]`` is the IR
    op name). ``BUF_*``: ``BUF_I=0 input, BUF_O=1 output, BUF_S=2 scratch``.

``blocks`` (one row per threadblock, ordered by rank then threadblock position;
the row index is the *block index*, also the flag index)
    ``B_RANK`` rank; ``B_TB`` threadblock id; ``B_CHAN`` channel;
    ``B_SEND_PEER``/``B_RECV_PEER`` peers or -1; ``B_SEND_CONN``/``B_RECV_CONN``
    rows of ``conns`` or -1; ``B_STEP_BEGIN`` first row in ``steps``;
    ``B_NSTEPS`` number of steps.
    ``rank_blocks[r]:rank_blocks[r+1]`` are rank ``r``'s block rows.

``steps`` (one row per IR step, blocks' steps contiguous and in order)
    ``S_OP`` op code; ``S_SRC_BUF``/``S_SRC_OFF``, ``S_DST_BUF``/``S_DST_OFF``
    exactly as in the IR (on send-type steps dst is the *receiver's* location,
    on recv-type steps src is the *sender's*; the local operands of an op are
    those with ``LOCAL_SRC[op]``/``LOCAL_DST[op]`` true); ``S_COUNT`` chunks;
    ``S_DEP_BEGIN``/``S_NDEPS`` rows of ``deps``; ``S_HAS_DEP`` 1 if the
    block publishes its flag after this step; ``S_BLOCK`` block index;
    ``S_INDEX`` IR step index in its block; ``S_XML_S`` XML ``s`` index (after
    nop insertion; publish either consistently: both orders agree);
    ``S_SEND_CONN``/``S_SEND_SEQ`` connection this step sends on and its
    position among that connection's sends per iteration (-1 if it does not
    send); ``S_RECV_CONN``/``S_RECV_SEQ`` likewise for receiving;
    ``S_SEND_PEER_STEP`` step row of the matching receive on the receiver;
    ``S_RECV_PEER_STEP`` step row of the matching send on the sender (-1 when
    the connection's sequences do not pair up there).

``deps`` (one row per dependency, grouped by step)
    ``D_BLOCK`` block index waited on (-1 if that threadblock id does not
    exist); ``D_INDEX`` IR step index in that block; ``D_STEP`` its step row
    (-1 if out of range); ``D_XML_S`` its XML ``s`` index.
    Semantics: wait until block ``D_BLOCK`` has published at least
    (same iteration, ``D_INDEX``).

``conns`` (one row per FIFO, i.e. per (channel, sender, receiver) named by any
threadblock)
    ``C_CHAN``; ``C_SENDER``/``C_RECEIVER`` ranks; ``C_SEND_BLOCK``/``C_RECV_BLOCK``
    block indices of the two ends or -1 when one end is missing; ``C_NSENDS``/
    ``C_NRECVS`` send-/recv-type steps on it per iteration.

``chunks`` (ngpus x 3): declared chunks of buffers i, o, s per rank (bounds).
``call_chunks`` (ngpus x 3): chunks of i, o, s a call provides per rank, from
the collective (allgather input ``nchunksperloop/ngpus``, reduce_scatter output
``nchunksperloop/ngpus``, otherwise ``nchunksperloop``; custom, gather and
scatter: declared).

``aliases(inplace)`` (ngpus x 3 x 2): buffer ``b`` of rank ``r`` is the window of
buffer ``a[r, b, 0]`` starting at chunk ``a[r, b, 1]``; identity out of place.
In place (:mod:`msccl_py.collective_table`): allreduce and others input == output; allgather input =
output + rank*i_chunks; reduce_scatter output = input + rank*o_chunks.

Caching: ``plan_for(alg)`` keeps one plan per live Algorithm object (keyed by
``id`` with a weakref finaliser). Mutating an Algorithm after planning needs
``plan_for(alg, refresh=True)``.

>>> from msccl_py import ir
>>> tb0 = ir.Threadblock(0, send_peer=1, steps=[ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
>>> tb1 = ir.Threadblock(0, recv_peer=0, steps=[ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0))])
>>> alg = ir.Algorithm("p2p", "custom", "Simple", False, 2, 1, 1,
...                    [ir.Gpu(0, 1, 1, 0, [tb0]), ir.Gpu(1, 1, 1, 0, [tb1])])
>>> p = plan_for(alg)
>>> p.conns[0, [C_SEND_BLOCK, C_RECV_BLOCK]].tolist(), int(p.steps[0, S_SEND_PEER_STEP])
([0, 1], 1)
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

import numpy as np

from msccl_py import collective_table, ir
from msccl_py.errors import MscclError

#: the IR's op numbering, the only one: the C++ and CUDA executors' enums are checked
#: against it when they are built (:func:`check_op_enum`)
OP_NAMES = tuple(ir.OP_CODES)
OP_SEND, OP_RECV, OP_RCS, OP_RRS, OP_RRC, OP_RRCS, OP_COPY, OP_REDUCE = range(len(OP_NAMES))
#: each op code's name in the C++ and CUDA sources, in code order
OP_ENUM_NAMES = ("OP_SEND", "OP_RECV", "OP_RCS", "OP_RRS", "OP_RRC", "OP_RRCS", "OP_COPY",
                 "OP_REDUCE")
OP_CODE = {name: code for code, name in enumerate(OP_NAMES)}
BUF_NAMES = (ir.INPUT, ir.OUTPUT, ir.SCRATCH)
BUF_I, BUF_O, BUF_S = range(3)
BUF_CODE = {name: code for code, name in enumerate(BUF_NAMES)}

#: per op code: sends / receives / reduces / reads local src / writes local dst
IS_SEND = np.array([OP_NAMES[c] in ir.SENDS for c in range(8)])
IS_RECV = np.array([OP_NAMES[c] in ir.RECVS for c in range(8)])
IS_REDUCE = np.array([OP_NAMES[c] in ir.REDUCES for c in range(8)])
LOCAL_SRC = np.array([OP_NAMES[c] in ir.READS_SRC for c in range(8)])
LOCAL_DST = np.array([OP_NAMES[c] in ir.WRITES_DST for c in range(8)])

(B_RANK, B_TB, B_CHAN, B_SEND_PEER, B_RECV_PEER, B_SEND_CONN, B_RECV_CONN, B_STEP_BEGIN,
 B_NSTEPS) = range(9)
B_NCOLS = 9
(S_OP, S_SRC_BUF, S_SRC_OFF, S_DST_BUF, S_DST_OFF, S_COUNT, S_DEP_BEGIN, S_NDEPS, S_HAS_DEP,
 S_BLOCK, S_INDEX, S_XML_S, S_SEND_CONN, S_SEND_SEQ, S_RECV_CONN, S_RECV_SEQ, S_SEND_PEER_STEP,
 S_RECV_PEER_STEP) = range(18)
S_NCOLS = 18
D_BLOCK, D_INDEX, D_STEP, D_XML_S = range(4)
D_NCOLS = 4
C_CHAN, C_SENDER, C_RECEIVER, C_SEND_BLOCK, C_RECV_BLOCK, C_NSENDS, C_NRECVS = range(7)
C_NCOLS = 7


class PlanError(MscclError):
    """The IR cannot be flattened (e.g. two threadblocks share one FIFO end)."""


@dataclass
class Plan:
    """The flat tables of one algorithm; see the module docstring for every column."""

    collective: str
    protocol: str
    ngpus: int
    nchunksperloop: int
    blocks: np.ndarray
    steps: np.ndarray
    deps: np.ndarray
    conns: np.ndarray
    rank_blocks: np.ndarray
    chunks: np.ndarray
    call_chunks: np.ndarray
    _alias: dict = field(default_factory=dict, repr=False)
    _lists: dict = field(default_factory=dict, repr=False, compare=False)

    def as_lists(self, table: str) -> list:
        """Table ``table`` (``"blocks"``, ``"steps"``, ``"deps"``, ``"conns"``) as nested
        lists, made once: models walk them row by row, where NumPy scalars cost ten times
        as much. Treat the result as read-only, like the tables."""
        rows = self._lists.get(table)
        if rows is None:
            rows = self._lists[table] = getattr(self, table).tolist()
        return rows

    def step_column(self, col: int) -> list:
        """Column ``col`` of ``steps`` as a list, made once (the models' per-step lookups)."""
        key = ("steps", col)
        values = self._lists.get(key)
        if values is None:
            values = self._lists[key] = self.steps[:, col].tolist()
        return values

    @property
    def nblocks(self) -> int:
        return len(self.blocks)

    @property
    def nsteps(self) -> int:
        return len(self.steps)

    @property
    def max_count(self) -> int:
        """Largest step count (decides the small-message regime)."""
        return int(self.steps[:, S_COUNT].max()) if len(self.steps) else 1

    def block_steps(self, block: int) -> np.ndarray:
        """The ``steps`` rows of one block."""
        b = self.blocks[block]
        return self.steps[b[B_STEP_BEGIN]:b[B_STEP_BEGIN] + b[B_NSTEPS]]

    def step_deps(self, step: int) -> np.ndarray:
        """The ``deps`` rows of one step."""
        s = self.steps[step]
        return self.deps[s[S_DEP_BEGIN]:s[S_DEP_BEGIN] + s[S_NDEPS]]

    def describe_step(self, step: int) -> str:
        """``rank R tb T step I (op)`` for messages."""
        s = self.steps[step]
        b = self.blocks[s[S_BLOCK]]
        return f"rank {b[B_RANK]} tb {b[B_TB]} step {s[S_INDEX]} ({OP_NAMES[s[S_OP]]})"

    def aliases(self, inplace: bool) -> np.ndarray:
        """Buffer aliasing table of an in-place or out-of-place call (see module doc)."""
        key = bool(inplace)
        if key not in self._alias:
            self._alias[key] = _alias_table(self.collective, self.call_chunks, key)
        return self._alias[key]


def op_enum(base: int) -> str:
    """The C enum of the op codes numbered from ``base``, as the native sources write it.

    >>> op_enum(1)[:40]
    'enum : int { OP_SEND = 1, OP_RECV, OP_RC'
    """
    first, *rest = OP_ENUM_NAMES
    return "enum : int { " + ", ".join([f"{first} = {base}", *rest]) + " };"


def check_op_enum(text: str, base: int, where: str) -> None:
    """Refuse a C++/CUDA source whose op numbering is not the IR's (:func:`op_enum`)."""
    if op_enum(base) not in text:
        raise MscclError(f"{where}: its op enum is not the IR's numbering; it must read "
                         f"{op_enum(base)!r} (msccl_py/plan/tables.py OP_NAMES)")


def call_chunk_counts(alg: ir.Algorithm) -> np.ndarray:
    """Chunks of buffers i, o, s a call of ``alg`` provides, per rank (ngpus x 3)."""
    n, g = alg.nchunksperloop, max(1, alg.ngpus)
    out = np.zeros((len(alg.gpus), 3), dtype=np.int64)
    layout = layout_of(alg.collective)
    for r, gpu in enumerate(alg.gpus):
        if layout == "declared":
            i, o = gpu.input_chunks, gpu.output_chunks
        else:
            i, o = layout_chunks(layout, n, g)
        out[r] = (i, o, gpu.scratch_chunks)
    return out


def layout_of(collective: str) -> str:
    """The collective's buffer layout (:mod:`msccl_py.collective_table`); unknown: declared."""
    found = collective_table.KINDS.get(collective)
    return found.layout if found is not None else "declared"


def layout_chunks(layout: str, n: int, g: int) -> tuple[int, int]:
    """(input, output) chunks per rank of a ``same``/``gathered``/``scattered`` layout."""
    if layout == "gathered":
        return n // g, n
    if layout == "scattered":
        return n, n // g
    return n, n


def _alias_table(collective: str, call_chunks: np.ndarray, inplace: bool) -> np.ndarray:
    a = np.zeros((len(call_chunks), 3, 2), dtype=np.int64)
    a[:, :, 0] = np.arange(3)
    if not inplace:
        return a
    layout = layout_of(collective)
    for r in range(len(call_chunks)):
        if layout == "gathered":
            a[r, BUF_I] = (BUF_O, r * call_chunks[r, BUF_I])
        elif layout == "scattered":
            a[r, BUF_O] = (BUF_I, r * call_chunks[r, BUF_O])
        else:
            a[r, BUF_I] = (BUF_O, 0)
    return a


def build_plan(alg: ir.Algorithm) -> Plan:
    """Flatten ``alg`` into a :class:`Plan` (uncached; see :func:`plan_for`).

    Raises :class:`PlanError` when two threadblocks of a rank claim the same
    FIFO end. Other rule breaks (bad peers, mismatched sequences) are kept in
    the tables for the verifier to report.
    """
    # Blocks and connections are few and built as Python lists (kept as the plan's
    # ``as_lists`` rows); the steps, hundreds of thousands, are read into the table column
    # by column and every derived column is computed by NumPy, never row by row.
    gpus = alg.gpus
    block_rows: list[list[int]] = []
    block_of: dict[tuple[int, int], int] = {}   # (rank, tb id) -> block index
    rank_blocks = [0] * (len(gpus) + 1)
    tbs: list = []
    si = 0
    for r, gpu in enumerate(gpus):
        rank_blocks[r] = len(block_rows)
        for tb in gpu.threadblocks:
            block_of.setdefault((r, tb.id), len(block_rows))
            block_rows.append([r, tb.id, tb.channel, tb.send_peer, tb.recv_peer, -1, -1, si,
                               len(tb.steps)])
            tbs.append(tb)
            si += len(tb.steps)
    rank_blocks[len(gpus)] = len(block_rows)
    conn_rows = _connections(block_rows)
    blocks = _table(block_rows, B_NCOLS)
    steps, deps = _step_table(tbs, blocks, block_of, conn_rows)
    chunks = _table([[g.input_chunks, g.output_chunks, g.scratch_chunks] for g in gpus], 3)
    return Plan(alg.collective, alg.protocol, alg.ngpus, alg.nchunksperloop, blocks, steps, deps,
                _table(conn_rows, C_NCOLS), np.array(rank_blocks, dtype=np.int64), chunks,
                call_chunk_counts(alg), _lists={"blocks": block_rows})


def _table(rows: list, ncols: int) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(len(rows), ncols)


def _connections(block_rows: list) -> list[list[int]]:
    """The ``conns`` rows; fills the blocks' ``B_SEND_CONN``/``B_RECV_CONN``."""
    conn_of: dict[tuple[int, int, int], int] = {}
    conn_rows: list[list[int]] = []

    def conn(chan: int, sender: int, receiver: int) -> int:
        key = (chan, sender, receiver)
        c = conn_of.get(key)
        if c is None:
            c = conn_of[key] = len(conn_rows)
            conn_rows.append([chan, sender, receiver, -1, -1, 0, 0])
        return c

    def claim(c: int, end: int, b: int, what: str) -> int:
        """Make block ``b`` the ``end`` (send or receive block) of connection ``c``."""
        row = conn_rows[c]
        if row[end] >= 0:
            r, tb, chan = block_rows[b][:B_SEND_PEER]
            raise PlanError(f"rank {r}: threadblocks {block_rows[row[end]][B_TB]} and {tb} both "
                            f"{what} on channel {chan}")
        row[end] = b
        return c

    for b, brow in enumerate(block_rows):
        r, tb, chan, sp, rp = brow[:B_SEND_CONN]
        if sp >= 0:
            brow[B_SEND_CONN] = claim(conn(chan, r, sp), C_SEND_BLOCK, b, f"send to rank {sp}")
        if rp >= 0:
            brow[B_RECV_CONN] = claim(conn(chan, rp, r), C_RECV_BLOCK, b,
                                      f"receive from rank {rp}")
    return conn_rows


def _step_table(tbs: list, blocks: np.ndarray, block_of: dict, conn_rows: list):
    """The ``steps`` and ``deps`` tables; fills the connections' send and receive counts.

    Each connection has one send block and one receive block (``_connections``
    refuses a second), so its sends are that block's send-type steps in order,
    and the k-th send pairs with the k-th receive of the receive block.
    """
    allsteps = list(chain.from_iterable(map(attrgetter("steps"), tbs)))
    n, nb, nconns = len(allsteps), len(blocks), len(conn_rows)
    steps = np.empty((n, S_NCOLS), dtype=np.int64)
    # one list comprehension per column (the fastest way through the step objects)
    op_code, buf_code = OP_CODE, BUF_CODE
    op = np.array([op_code[st.op] for st in allsteps], dtype=np.int64)
    steps[:, S_OP] = op
    srcs = [st.src for st in allsteps]
    steps[:, S_SRC_BUF] = [-1 if loc is None else buf_code.get(loc.buffer, -1) for loc in srcs]
    steps[:, S_SRC_OFF] = [-1 if loc is None else loc.offset for loc in srcs]
    dsts = [st.dst for st in allsteps]
    steps[:, S_DST_BUF] = [-1 if loc is None else buf_code.get(loc.buffer, -1) for loc in dsts]
    steps[:, S_DST_OFF] = [-1 if loc is None else loc.offset for loc in dsts]
    steps[:, S_COUNT] = [st.count for st in allsteps]
    depends = [st.depends for st in allsteps]
    nd = np.array([len(d) for d in depends], dtype=np.int64)
    steps[:, S_NDEPS] = nd
    steps[:, S_DEP_BEGIN] = np.cumsum(nd) - nd
    steps[:, S_HAS_DEP] = [1 if st.has_dependents else 0 for st in allsteps]
    nsteps = blocks[:, B_NSTEPS]
    steps[:, S_BLOCK] = np.repeat(np.arange(nb, dtype=np.int64), nsteps)
    start = np.repeat(blocks[:, B_STEP_BEGIN], nsteps)   # each step's block's first row
    index = np.arange(n, dtype=np.int64) - start
    steps[:, S_INDEX] = index

    def upto(values: np.ndarray) -> np.ndarray:
        """Per step: the sum of ``values`` over its block's steps up to it, itself included."""
        acc = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(values, out=acc[1:])
        return acc[1:] - acc[start]

    # ir.xml_step_index: one nop per dependency past the first, before the step
    steps[:, S_XML_S] = index + upto(np.maximum(nd - 1, 0))
    counts = []
    for is_op, b_col, conn_col, seq_col in ((IS_SEND, B_SEND_CONN, S_SEND_CONN, S_SEND_SEQ),
                                            (IS_RECV, B_RECV_CONN, S_RECV_CONN, S_RECV_SEQ)):
        conn = np.repeat(blocks[:, b_col], nsteps)
        on = is_op[op] & (conn >= 0)
        steps[:, conn_col] = np.where(on, conn, -1)
        steps[:, seq_col] = np.where(on, upto(on) - 1, -1)
        counts.append(np.bincount(conn[on], minlength=nconns))
    for row, ns, nr in zip(conn_rows, counts[0].tolist(), counts[1].tolist()):
        row[C_NSENDS], row[C_NRECVS] = ns, nr
    steps[:, S_SEND_PEER_STEP] = -1
    steps[:, S_RECV_PEER_STEP] = -1
    if nconns:
        ends = np.array([(row[C_SEND_BLOCK], row[C_RECV_BLOCK]) for row in conn_rows])
        paired = (ends[:, 0] >= 0) & (ends[:, 1] >= 0)
        recv_rows = np.flatnonzero(steps[:, S_RECV_CONN] >= 0)
        first = recv_rows[steps[recv_rows, S_RECV_SEQ] == 0]
        at = np.zeros(nconns, dtype=np.int64)   # position of a connection's first receive
        at[steps[first, S_RECV_CONN]] = np.searchsorted(recv_rows, first)
        send_rows = np.flatnonzero(steps[:, S_SEND_CONN] >= 0)
        c, k = steps[send_rows, S_SEND_CONN], steps[send_rows, S_SEND_SEQ]
        ok = paired[c] & (k < counts[1][c])
        s, q = send_rows[ok], recv_rows[at[c[ok]] + k[ok]]
        steps[s, S_SEND_PEER_STEP] = q
        steps[q, S_RECV_PEER_STEP] = s
    return steps, _dep_table(steps, blocks, block_of, depends, nd)


def _dep_table(steps: np.ndarray, blocks: np.ndarray, block_of: dict, depends: list,
               nd: np.ndarray) -> np.ndarray:
    """The ``deps`` rows of the steps that have dependencies, in step order."""
    dep_rows: list[list[int]] = []
    ranks = blocks[:, B_RANK].tolist()
    for g, b in zip(np.flatnonzero(nd).tolist(), steps[nd > 0, S_BLOCK].tolist()):
        r = ranks[b]
        for dep_tb, dep_index in depends[g]:
            dep_rows.append([block_of.get((r, dep_tb), -1), dep_index, -1, -1])
    deps = _table(dep_rows, D_NCOLS)
    if len(deps):
        tgt = deps[:, D_BLOCK]
        ok = tgt >= 0
        idx = deps[:, D_INDEX]
        nst = np.where(ok, blocks[np.where(ok, tgt, 0), B_NSTEPS], 0)
        ok &= (idx >= 0) & (idx < nst)
        first = blocks[np.where(ok, tgt, 0), B_STEP_BEGIN]
        deps[:, D_STEP] = np.where(ok, first + idx, -1)
        deps[:, D_XML_S] = np.where(ok, steps[np.where(ok, deps[:, D_STEP], 0), S_XML_S], -1)
    return deps


#: id(algorithm) -> plan; plans hold no reference to their algorithm, so the
#: finaliser drops the entry when the algorithm is collected.
_CACHE: dict[int, Plan] = {}


def plan_for(alg: ir.Algorithm, refresh: bool = False) -> Plan:
    """The cached :class:`Plan` of ``alg`` (built on first use).

    >>> from msccl_py import ir
    >>> alg = ir.Algorithm("empty", "custom", "Simple", False, 1, 1, 1, [ir.Gpu(0, 1, 1)])
    >>> plan_for(alg) is plan_for(alg)
    True
    """
    key = id(alg)
    plan = _CACHE.get(key)
    if plan is None or refresh:
        plan = build_plan(alg)
        if key not in _CACHE:
            weakref.finalize(alg, _CACHE.pop, key, None)
        _CACHE[key] = plan
    return plan
