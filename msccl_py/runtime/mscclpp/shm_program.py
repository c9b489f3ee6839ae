"""An MSCCL++ plan call flattened for the shm runtime: arena layout and per-rank tables.

Every rank's buffers, LL packet space (payload and one flag byte per
element) and signal counters live in its data region of the process group's
arena (:mod:`msccl_py.transport.shm_arena`), so a put is a store into the
peer's memory and a wait polls a counter the peer increments. :func:`layout`
places them; :func:`compile_rank` turns one rank's threadblocks, pipelines
unrolled, into integer tables whose operands are arena byte offsets, with
the reference backend's semantics (:mod:`msccl_py.plan.mscclpp.execute`): every
source is read before any destination is written, a write truncates to the
destination's span, LL scratch shares bytes between data and packets. The
native executor (``runtime/mscclpp/native/plan_exec.cpp``) runs the tables; the
Python fallback uses the layout only.

>>> from msccl_py.plan.mscclpp.geometry import geometry
>>> from msccl_py.targets.mscclpp.read import read_plan_text
>>> plan = read_plan_text('{"name":"c","collective":"test","protocol":"Simple","inplace":false,'
...   '"gpus":[{"id":0,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,'
...   '"threadblocks":[{"id":0,"ops":[{"name":"copy",'
...   '"src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}]}]}]}')
>>> lay = layout(plan, geometry(plan, 64), np.dtype(np.float32))
>>> lay.bases[0], lay.size
({'s': 0, 'i': 64, 'o': 128}, 192)
>>> t = compile_rank(plan, lay, 0, [4096])
>>> t.arrays["acts"].tolist()       # one direct copy of 16 elements
[[0, 0, 1, 0, 1, 16]]
>>> t.arrays["srcs"].tolist(), t.arrays["dsts"][0, :3].tolist()   # arena offsets of i and o
([[4160]], [0, 4224, 16])
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from msccl_py.plan.mscclpp.memory import Machine, PlanInvalid, Step, expand
from msccl_py.plan.mscclpp.geometry import Geometry, buffer_views
from msccl_py.mscclpp_ir import Plan, Ref

ALIGN = 64
#: operations that read or write LL packets
PACKET_OPS = frozenset({"ppkt", "rppkt", "cpkt", "upkt", "repkt", "recpkt", "respkt", "recspkt",
                        "gstorepkt"})
#: which sources of a packet-reading operation are packets (the rest is data), as interp has it
PACKET_SOURCES = {"rppkt": slice(0, 1), "upkt": slice(0, 1), "gstorepkt": slice(0, 1),
                  "repkt": slice(1, None), "respkt": slice(1, None), "recpkt": slice(1, None),
                  "recspkt": slice(1, None)}

# table codes and row widths: keep in sync with runtime/mscclpp/native/plan_exec.cpp
K_NOP, K_DATA, K_SIGNAL, K_WAIT, K_BARRIER, K_SEM_ACQ, K_SEM_REL = range(7)
A_DIRECT, A_BLOCKS, A_TEMP = range(3)
D_DATA, D_PKT, D_RAW = range(3)
STEP_W, ACT_W, DST_W, CHAN_W, CHECK_W, RESET_W = 9, 6, 10, 3, 2, 3
R_ZERO, R_FILL = range(2)
TABLES = ("tbs", "steps", "acts", "srcs", "dsts", "chans", "checks", "lists", "resets", "sem_init")


@dataclass(frozen=True)
class Layout:
    """Byte offsets, relative to a rank's data region, of everything the call keeps there."""
    geo: Geometry
    dtype: np.dtype
    fill: object                                   # the reference backend's poison
    views: list[dict[str, tuple[str, int, int]]]   # per rank: buffer -> (base, element offset, n)
    bases: list[dict[str, int]]                    # per rank: base -> byte offset
    packets: list[dict[str, tuple[int, int]]]      # per rank: buffer -> (payload, flags) offsets
    counters: list[int]                            # per rank: first counter's byte offset
    slots: dict[tuple, tuple[int, int]]            # counter key -> (owner rank, slot)
    pair: dict[tuple, tuple]                       # (rank, type, channel) -> counter key it signals
    base_elems: list[dict[str, int]]               # per rank: base -> elements
    size: int                                      # bytes of the largest rank's share

    def data(self, rank: int, buf: str, elem: int) -> int:
        """Byte offset of element ``elem`` of buffer ``buf`` of ``rank`` (within its region)."""
        base, lo, _ = self.views[rank][buf]
        return self.bases[rank][base] + (lo + elem) * self.dtype.itemsize


def has_packets(plan: Plan) -> bool:
    return any(op.name in PACKET_OPS for g in plan.gpus for tb in g.threadblocks
               for top in tb.ops for op in [top] + top.ops)


def _aligned(n: int) -> int:
    return -(-max(n, 1) // ALIGN) * ALIGN


def layout(plan: Plan, geo: Geometry, dtype: np.dtype) -> Layout:
    """Where each rank's buffers, packets and counters go; PlanInvalid when the element
    type cannot meet the plan's alignment."""
    isz = dtype.itemsize
    if plan.buffer_alignment % isz:
        raise PlanInvalid(f"the plan's {plan.buffer_alignment}-byte alignment is not a multiple of "
                          f"the {isz}-byte element")
    pair = Machine._pair_channels(SimpleNamespace(plan=plan))
    keys: list[list[tuple]] = [[] for _ in plan.gpus]
    for key in sorted(set(pair) | set(pair.values()), key=str):
        keys[key[0]].append(key)
    slots = {k: (r, i) for r, ks in enumerate(keys) for i, k in enumerate(ks)}
    packets = has_packets(plan)
    views, bases, pkts, counters, elems, size = [], [], [], [], [], 0
    for r, sizes in enumerate(geo.sizes):
        base_n, view = buffer_views(plan, r, sizes, isz)
        off, where = 0, {}
        for name, n in base_n.items():
            where[name] = off
            off += _aligned(n * isz)
        pk = {}
        if packets:
            for buf in ("i", "o", "s"):
                n = view[buf][2]
                pk[buf] = (off, off + _aligned(n * isz))
                off += _aligned(n * isz) + _aligned(n)
        counters.append(off)
        off += ALIGN * len(keys[r])
        views.append(view)
        bases.append(where)
        pkts.append(pk)
        elems.append(base_n)
        size = max(size, off)
    fill = np.nan if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
    return Layout(geo, dtype, fill, views, bases, pkts, counters, slots, pair, elems, size)


def fill_word(lay: Layout) -> int:
    """The poison element's bytes as one int64 (little-endian, zero-padded)."""
    raw = np.array(lay.fill, dtype=lay.dtype).tobytes().ljust(8, b"\0")
    return int(np.frombuffer(raw, dtype=np.int64)[0])


class _Compiler:
    """One rank's tables; operands are arena byte offsets (``region[rank]`` + layout offset)."""

    def __init__(self, plan: Plan, lay: Layout, rank: int, region: list[int]):
        self.plan, self.lay, self.rank, self.region = plan, lay, rank, region
        self.isz = lay.dtype.itemsize
        self.shape = SimpleNamespace(plan=plan, geo=lay.geo, itemsize=self.isz)
        self.ll = plan.packets
        self.t = {name: [] for name in TABLES}
        self.bars: dict[int, int] = {}

    # -- operands ----------------------------------------------------------------------------
    def span(self, st: Step, ref: Ref, rank: int, size_ref: Ref | None) -> tuple[int, int]:
        return Machine.span(self.shape, st, ref, rank, size_ref)

    def data_at(self, rank: int, buf: str, elem: int) -> int:
        return self.region[rank] + self.lay.data(rank, buf, elem)

    def packet_at(self, rank: int, buf: str, elem: int) -> tuple[int, int]:
        payload, flags = self.lay.packets[rank][buf]
        return (self.region[rank] + payload + elem * self.isz, self.region[rank] + flags + elem)

    def read(self, st, ref: Ref, size_ref: Ref):
        """A data source: (byte offset, elements)."""
        owner = ref.rank if ref.rank is not None else self.rank
        off, n = self.span(st, ref, owner, size_ref)
        return self.data_at(owner, ref.buffer, off), n

    def read_packets(self, st, ref: Ref):
        """An LL packet source (always this rank's): its payload, and a readiness check."""
        off, n = self.span(st, ref, self.rank, st.op.src[0])
        payload, flags = self.packet_at(self.rank, ref.buffer, off)
        self.t["checks"].append([flags, n])
        return payload, n

    def write(self, st, ref: Ref, size_ref: Ref, n: int) -> list[int]:
        """A data destination for ``n`` values; LL scratch loses the packets it overlaps."""
        off, m = self.span(st, ref, ref.rank, size_ref)
        inval, count = -1, 0
        if self.ll and ref.buffer == "s":
            lo, hi = off // 2, -(-(off + m) // 2)
            inval, count = self.packet_at(ref.rank, "s", lo)[1], hi - lo
        return [D_DATA, self.data_at(ref.rank, ref.buffer, off), min(n, m), inval, count, -1, 0,
                -1, -1, ref.rank]

    def _clobber(self, rank: int, buf: str, off: int, k: int) -> tuple[int, int]:
        """The scratch data bytes a packet write over [off, off+k) overwrites (LL only)."""
        if not (self.ll and buf == "s"):
            return -1, 0
        n_all = self.lay.views[rank]["s"][2]
        start, stop = min(2 * off, n_all), min(2 * (off + k), n_all)
        return (self.data_at(rank, "s", start), stop - start) if stop > start else (-1, 0)

    def write_packets(self, st, ref: Ref, n: int) -> list[int]:
        off, m = self.span(st, ref, ref.rank, st.op.src[0])
        k = min(n, m)
        payload, flags = self.packet_at(ref.rank, ref.buffer, off)
        return [D_PKT, payload, k, flags, 0, *self._clobber(ref.rank, ref.buffer, off, k), -1, -1,
                ref.rank]

    def copy_packets(self, st, src: Ref, dst: Ref) -> list[int]:
        """Port-channel put_packet: raw packet bytes, flags included."""
        so, n = self.span(st, src, self.rank, src)
        do, _ = self.span(st, dst, dst.rank, src)
        sp, sf = self.packet_at(self.rank, src.buffer, so)
        payload, flags = self.packet_at(dst.rank, dst.buffer, do)
        return [D_RAW, payload, n, flags, 0, *self._clobber(dst.rank, dst.buffer, do, n), sp, sf,
                dst.rank]

    def action(self, srcs: list[tuple[int, int]], dsts: list[list[int]]) -> None:
        """Sources (all the same length) reduced in order, the result written to each destination."""
        t, isz = self.t, self.isz
        n = srcs[0][1]
        if any(d[0] == D_RAW for d in dsts):
            mode = A_DIRECT
        else:
            reads = [(off, off + n * isz) for off, _ in srcs]
            writes = []
            for d in dsts:
                writes.append((d[1], d[1] + d[2] * isz))
                if d[0] == D_DATA and d[3] >= 0:
                    writes.append((d[3], d[3] + d[4]))
                if d[0] == D_PKT:
                    writes.append((d[3], d[3] + d[2]))
                    if d[5] >= 0:
                        writes.append((d[5], d[5] + d[6] * isz))
            mode = _mode(reads, writes, len(srcs), len(dsts))
        t["acts"].append([mode, len(t["srcs"]), len(srcs), len(t["dsts"]), len(dsts), n])
        t["srcs"].extend([off] for off, _ in srcs)
        t["dsts"].extend(dsts)

    def channel(self, kind: int, ctype: str, c: int) -> list[int]:
        lay, rank = self.lay, self.rank
        if kind == K_WAIT:
            key = (rank, ctype, c)
            owner, slot = lay.slots[key]
            peer = self.plan.gpus[rank].channel_peers(ctype)[c]
            return [(self.region[owner] + lay.counters[owner] + slot * ALIGN) // 8, slot, peer]
        key = lay.pair[(rank, ctype, c)]
        owner, slot = lay.slots[key]
        return [(self.region[owner] + lay.counters[owner] + slot * ALIGN) // 8, -1, owner]

    # -- steps -------------------------------------------------------------------------------
    def step(self, st: Step) -> None:
        """Append one step row: kind, actions, channels, then packet checks (data steps) or
        semaphores (semaphore steps), then the barrier's slot and threadblock count."""
        t, op, name = self.t, st.op, st.op.name
        a0, c0, k0, l0 = len(t["acts"]), len(t["chans"]), len(t["checks"]), len(t["lists"])
        kind, x, y = K_DATA, 0, 0
        if name in ("nop", "flush"):
            kind = K_NOP
        elif name in ("signal", "rlxsignal", "wait", "rlxwait"):
            kind = K_SIGNAL if name in ("signal", "rlxsignal") else K_WAIT
            t["chans"].extend(self.channel(kind, op.channel_type, c) for c in op.channels)
        elif name == "barrier":
            kind, y = K_BARRIER, op.num_threadblocks
            x = self.bars.setdefault(op.barrier_id, len(self.bars))
        elif name in ("sem_acquire", "sem_release"):
            kind = K_SEM_ACQ if name == "sem_acquire" else K_SEM_REL
            t["lists"].extend([s] for s in op.semaphores)
        else:
            handler = getattr(self, "op_" + name, None)
            if handler is None:
                raise PlanInvalid(f"{op.path}: operation {name!r} has no shm implementation")
            handler(st)
            if name in ("pws", "pwsf"):
                t["chans"].extend(self.channel(K_SIGNAL, "port", c) for c in op.channels)
        if kind in (K_SEM_ACQ, K_SEM_REL):
            k0, kn = l0, len(t["lists"]) - l0
        else:
            kn = len(t["checks"]) - k0
        t["steps"].append([kind, a0, len(t["acts"]) - a0, c0, len(t["chans"]) - c0, k0, kn, x, y])

    def op_copy(self, st):
        src, dst = st.op.src[0], st.op.dst[0]
        s = self.read(st, src, src)
        self.action([s], [self.write(st, dst, src, s[1])])

    def op_put(self, st):
        op = st.op
        for i, dst in enumerate(op.dst):
            src = op.src[i] if i < len(op.src) else op.src[0]
            s = self.read(st, src, dst)
            self.action([s], [self.write(st, dst, dst, s[1])])

    op_pws = op_pwsf = op_put

    def op_get(self, st):
        # the executor swaps the offsets: remote at the local (dst) index, local at the src index
        for i, src in enumerate(st.op.src):
            dst = st.op.dst[i]
            remote = Ref(src.kind, src.buffer, dst.index, src.size, src.rank, src.remote)
            local = Ref(dst.kind, dst.buffer, src.index, dst.size, dst.rank)
            s = self.read(st, remote, src)
            self.action([s], [self.write(st, local, src, s[1])])

    def op_re(self, st):
        op = st.op
        srcs = [self.read(st, ref, op.src[0]) for ref in op.src]
        self.action(srcs, [self.write(st, dst, op.src[0], srcs[0][1]) for dst in op.dst])

    op_res = op_rre = op_rres = op_re

    def op_ppkt(self, st):
        op = st.op
        for i, dst in enumerate(op.dst):
            src = op.src[i] if i < len(op.src) else op.src[0]
            if op.channel_type == "port":
                d = self.copy_packets(st, src, dst)
                self.action([(d[7], d[2])], [d])
            else:
                s = self.read(st, src, src)
                self.action([s], [self.write_packets(st, dst, s[1])])

    def op_rppkt(self, st):
        s = self.read_packets(st, st.op.src[0])
        self.action([s], [self.write_packets(st, dst, s[1]) for dst in st.op.dst])

    def op_cpkt(self, st):
        s = self.read(st, st.op.src[0], st.op.src[0])
        self.action([s], [self.write_packets(st, st.op.dst[0], s[1])])

    def op_upkt(self, st):
        s = self.read_packets(st, st.op.src[0])
        self.action([s], [self.write(st, st.op.dst[0], st.op.src[0], s[1])])

    def op_repkt(self, st):
        op = st.op
        srcs = [self.read(st, op.src[0], op.src[0])] + [self.read_packets(st, r) for r in op.src[1:]]
        n = srcs[0][1]
        dsts = [self.write(st, op.dst[0], op.src[0], n)]
        first = 1
        if op.name in ("recpkt", "recspkt") and len(op.dst) > 1:
            dsts.append(self.write_packets(st, op.dst[1], n))
            first = 2
        if op.name in ("respkt", "recspkt"):
            dsts += [self.write_packets(st, d, n) for d in op.dst[first:]]
        self.action(srcs, dsts)

    op_respkt = op_recpkt = op_recspkt = op_repkt

    def _group(self, ref: Ref) -> tuple[int, ...]:
        return self.plan.gpus[self.rank].switch_channels[ref.switch].ranks

    def op_glres(self, st):
        src, dst = st.op.src[0], st.op.dst[0]
        srcs = [self.read(st, Ref("remote", src.buffer, src.index, src.size, r), src)
                for r in self._group(src)]
        self.action(srcs, [self.write(st, Ref("remote", dst.buffer, dst.index, dst.size, r), src,
                                      srcs[0][1]) for r in self._group(dst)])

    def op_gstore(self, st):
        src, dst = st.op.src[0], st.op.dst[0]
        s = self.read(st, src, src)
        self.action([s], [self.write(st, Ref("remote", dst.buffer, dst.index, dst.size, r), src,
                                     s[1]) for r in self._group(dst)])

    def op_gstorepkt(self, st):
        src, dst = st.op.src[0], st.op.dst[0]
        s = self.read_packets(st, src)
        self.action([s], [self.write_packets(st, Ref("remote", "s", dst.index, dst.size, r), s[1])
                          for r in self._group(dst)])


def _mode(reads, writes, nsrc: int, ndst: int) -> int:
    """How the executor may run an action and still read every source before writing.

    One destination: in place, unless a destination range overlaps a source
    other than at the same start (one source: memmove copes with any overlap).
    More: through a block buffer unless anything written overlaps a source or
    another write, when the whole result is computed first.
    """
    def overlap(a, b):
        return a[0] < b[1] and b[0] < a[1] and a[1] > a[0] and b[1] > b[0]
    if ndst == 1:
        # flags, invalidations and clobbers follow the whole write: every source is read by then
        main = writes[0]
        if nsrc > 1 and any(overlap(main, r) and main[0] != r[0] for r in reads):
            return A_TEMP
        return A_DIRECT if nsrc <= 2 else A_BLOCKS
    if any(overlap(w, r) for w in writes for r in reads) or any(
            overlap(a, b) for i, a in enumerate(writes) for b in writes[i + 1:]):
        return A_TEMP
    return A_BLOCKS


@dataclass
class RankTables:
    """One rank's tables (int64 arrays named in :data:`TABLES`, padded to one row when empty;
    ``rows`` has their true lengths) and what its state arrays need."""
    arrays: dict[str, np.ndarray]
    rows: dict[str, int]
    nslots: int                      # signal counters this rank owns (and takes from)
    barrier_slots: dict[int, int]    # barrier id -> slot
    fill: int
    steps: list[list[Step]]          # per threadblock, for wait reports


def resets(lay: Layout, rank: int, region: int) -> list[list[int]]:
    """What a rank clears before each call: poison over its buffers but the input, zeros over
    its packet flags and counters."""
    isz = lay.dtype.itemsize
    rows = []
    in_base, lo, ni = lay.views[rank]["i"]
    for name, n in lay.base_elems[rank].items():
        start = region + lay.bases[rank][name]
        spans = [(0, lo), (lo + ni, n)] if name == in_base else [(0, n)]
        rows += [[start + a * isz, (b - a) * isz, R_FILL] for a, b in spans if b > a]
    for buf, (_, flags) in lay.packets[rank].items():
        rows.append([region + flags, lay.views[rank][buf][2], R_ZERO])
    nslots = sum(1 for owner, _ in lay.slots.values() if owner == rank)
    if nslots:
        rows.append([region + lay.counters[rank], nslots * ALIGN, R_ZERO])
    return rows


def compile_rank(plan: Plan, lay: Layout, rank: int, region: list[int]) -> RankTables:
    """Rank ``rank``'s tables; ``region[r]`` is rank r's data region in the arena (bytes).

    Raises PlanInvalid for a chunk range past a buffer or an operation it cannot run.
    """
    comp = _Compiler(plan, lay, rank, region)
    t = comp.t
    per_tb = []
    for tb in plan.gpus[rank].threadblocks:
        steps = expand(plan, lay.geo.chunk, tb.ops)
        t["tbs"].append([len(steps), len(t["steps"])])
        for st in steps:
            comp.step(st)
        per_tb.append(steps)
    t["resets"] = resets(lay, rank, region[rank])
    sems = plan.gpus[rank].semaphores
    t["sem_init"] = [[v] for v in sems]
    for tb, steps in zip(plan.gpus[rank].threadblocks, per_tb):
        for st in steps:
            bad = [s for s in st.op.semaphores if not 0 <= s < len(sems)]
            if bad:
                raise PlanInvalid(f"{st.op.path}: semaphore {bad[0]} is not one of rank {rank}'s "
                                  f"{len(sems)}")
    widths = {"tbs": 2, "steps": STEP_W, "acts": ACT_W, "srcs": 1, "dsts": DST_W, "chans": CHAN_W,
              "checks": CHECK_W, "lists": 1, "resets": RESET_W, "sem_init": 1}
    arrays = {name: np.array(t[name] or [[0] * widths[name]], dtype=np.int64).reshape(-1, widths[name])
              for name in TABLES}
    nslots = sum(1 for owner, _ in lay.slots.values() if owner == rank)
    return RankTables(arrays, {name: len(t[name]) for name in TABLES}, nslots, dict(comp.bars),
                      fill_word(lay), per_tb)
