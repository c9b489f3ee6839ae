"""Channel and threadblock assignment.

A threadblock owns at most one send connection and one receive connection,
and a GPU has at most one threadblock per (channel, send peer) and per
(channel, receive peer). ``auto`` packs instructions into threadblocks
under those rules and raises :class:`Conflict` for a fused instruction whose
(receive peer, send peer) pair cannot share one threadblock, for the driver
to split it. ``manual`` takes the user's ``sendtb``/``recvtb`` and reports the two
operations behind any conflict. As in msccl-tools, a side left out (``-1``)
is not an error: every such operation of a rank joins one more threadblock
of that rank (numbered with the others), under the same one-send-peer,
one-receive-peer, one-channel rule.

Channels: an operation's channel is its ``ch`` (0 when unset); instance
``i`` gets its own copy of every channel (interleaved: ``ch*I + i``;
batched: ``i*C + ch`` for ``C`` base channels). Threadblock ids of manual
programs replicate the same way.
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr
from msccl_py.compiler.trace import Op
from msccl_py.errors import ProgramError


#: threadblocks per GPU the automatic policy keeps within where pairing allows: RCCL's
#: limit, the smallest of the runtimes' (the others allow 216 and 1024)
TB_BUDGET = 64


class Conflict(Exception):
    """A fused instruction whose two peers cannot share a threadblock (auto policy)."""

    def __init__(self, ins: Instr):
        super().__init__(ins.id)
        self.ins = ins


class Tb:
    __slots__ = ("rank", "key", "id", "send_peer", "recv_peer", "channel", "steps",
                 "send_op", "recv_op", "chan_op", "ir")

    def __init__(self, rank: int, key, channel, send_peer: int = -1, recv_peer: int = -1,
                 id: int = -1):
        self.rank = rank
        self.key = key
        self.id = id
        self.send_peer = send_peer
        self.recv_peer = recv_peer
        self.channel = channel  # the key (ch, instance); ``assign`` numbers it
        self.steps: list[Instr] = []
        self.send_op = self.recv_op = self.chan_op = None
        self.ir: list | None = None  # the IR steps of ``steps``, once built


def assign(dag: Dag, order: list[Instr], num_ranks: int, manual: bool,
           interleaved: bool) -> tuple[list[list[Tb]], int, dict]:
    """Assign every instruction in ``order`` to a threadblock.

    Returns per-rank threadblock lists (ids set), the channel count and the
    channel number of each ``Tb.channel`` key ``(ch, instance)``. The user's
    channel numbers are kept (scaled by instances), so ``ch=5`` is channel 5
    of one instance.
    """
    keys: set = set()
    if manual:
        tbs = _assign_manual(dag, order, num_ranks, keys)
    else:
        tbs = _assign_auto(dag, order, num_ranks, keys)
        _fit_budget(tbs, order)
    nbase = max((k[0] for k in keys), default=0) + 1
    ninst = max((k[1] for k in keys), default=0) + 1
    if interleaved:
        number = {k: k[0] * ninst + k[1] for k in keys}
    else:
        number = {k: k[1] * nbase + k[0] for k in keys}
    if manual:  # ids follow the user's numbering (automatic ones are set as they are made)
        for rank_tbs in tbs:
            rank_tbs.sort(key=(lambda t: t.key) if interleaved
                          else (lambda t: (t.key[1], t.key[0])))
            for i, tb in enumerate(rank_tbs):
                tb.id = i
    return tbs, nbase * ninst, number


def _place(tb: Tb, ins: Instr) -> None:
    ins.tb = tb
    ins.step = len(tb.steps)
    tb.steps.append(ins)


def _fit_budget(tbs: list[list[Tb]], order: list[Instr]) -> None:
    """Pair send-only with receive-only threadblocks of each rank past :data:`TB_BUDGET`.

    One connection per threadblock is the fastest layout, but a rank talking
    to many peers then needs more threadblocks than RCCL runs. Each pairing
    saves one; the pair's steps keep the global order, so waits between
    threadblocks still cannot form a cycle. The two directions of one
    exchange pair first, then any two on the same channel.
    """
    pos = None
    for rank_tbs in tbs:
        excess = len(rank_tbs) - TB_BUDGET
        if excess <= 0:
            continue
        if pos is None:
            pos = {ins.id: i for i, ins in enumerate(order)}
        sends: dict = {}
        by_channel: dict = {}
        for tb in rank_tbs:
            if tb.recv_peer < 0 <= tb.send_peer:
                sends[(tb.channel, tb.send_peer)] = tb
                by_channel.setdefault(tb.channel, []).append(tb)
        recvs = [tb for tb in rank_tbs if tb.send_peer < 0 <= tb.recv_peer]
        paired: set = set()
        for same_peer in (True, False):
            for rt in recvs:
                if excess <= 0:
                    break
                if id(rt) in paired:
                    continue
                st = sends.get((rt.channel, rt.recv_peer)) if same_peer else \
                    next((t for t in by_channel.get(rt.channel, ()) if id(t) not in paired), None)
                if st is None or id(st) in paired:
                    continue
                paired.update((id(st), id(rt)))
                st.recv_peer, st.recv_op = rt.recv_peer, rt.recv_op
                st.steps = sorted(st.steps + rt.steps, key=lambda ins: pos[ins.id])
                for k, ins in enumerate(st.steps):
                    ins.tb, ins.step = st, k
                rt.steps = []
                excess -= 1
        rank_tbs[:] = [tb for tb in rank_tbs if tb.steps]
        for i, tb in enumerate(rank_tbs):
            tb.id = tb.key = i


def _assign_auto(dag: Dag, order: list[Instr], num_ranks: int, keys: set) -> list[list[Tb]]:
    tbs: list[list[Tb]] = [[] for _ in range(num_ranks)]
    send_tb: list[dict] = [{} for _ in range(num_ranks)]
    recv_tb: list[dict] = [{} for _ in range(num_ranks)]
    local_tb: list[dict] = [{} for _ in range(num_ranks)]
    instrs = dag.instrs
    carrier = dag.carrier

    def new_tb(r, ch, sp, rp):
        n = len(tbs[r])
        tb = Tb(r, n, ch, sp, rp, n)
        tbs[r].append(tb)
        keys.add(ch)
        if sp >= 0:
            send_tb[r][(ch, sp)] = tb
        if rp >= 0:
            recv_tb[r][(ch, rp)] = tb
        return tb

    # A plain send or receive gets the threadblock of its connection, or a new
    # one of its own: joining it to an unrelated connection's threadblock
    # would serialise the two (an exchange with a peer would take two rounds).
    for ins in order:
        r = ins.rank
        ch = (ins.ch if ins.ch >= 0 else 0, ins.inst)
        sp, rp = ins.sp, ins.rp
        if rp < 0 <= sp:  # a plain send (placed inline: the commonest case)
            tb = send_tb[r].get((ch, sp))
            if tb is None:
                tb = new_tb(r, ch, sp, -1)
            ins.tb = tb
            steps = tb.steps
            ins.step = len(steps)
            steps.append(ins)
        elif sp < 0 <= rp:  # a plain receive
            tb = recv_tb[r].get((ch, rp))
            if tb is None:
                tb = new_tb(r, ch, -1, rp)
            ins.tb = tb
            steps = tb.steps
            ins.step = len(steps)
            steps.append(ins)
        elif sp >= 0:
            t1 = recv_tb[r].get((ch, rp))
            t2 = send_tb[r].get((ch, sp))
            tb = None
            if t1 is not None and t1 is t2:
                tb = t1
            elif t1 is None and t2 is None:
                tb = new_tb(r, ch, sp, rp)
            elif t2 is None and t1.send_peer < 0:
                tb = t1
                tb.send_peer = sp
                send_tb[r][(ch, sp)] = tb
            elif t1 is None and t2.recv_peer < 0:
                tb = t2
                tb.recv_peer = rp
                recv_tb[r][(ch, rp)] = tb
            if tb is None:
                raise Conflict(ins)
            _place(tb, ins)
        else:
            tb = None
            best = -1
            for q in ins.preds:
                pi = instrs[carrier[q]]
                if pi.tb is not None and pi.tb.rank == r and pi.seq > best:
                    best, tb = pi.seq, pi.tb
            if tb is None:
                tb = local_tb[r].get(ch)
                if tb is None:
                    tb = local_tb[r][ch] = new_tb(r, ch, -1, -1)
            _place(tb, ins)
    return tbs


def _assign_manual(dag: Dag, order: list[Instr], num_ranks: int, keys: set) -> list[list[Tb]]:
    ops: list[Op] = dag.ops
    tbs: list[dict] = [{} for _ in range(num_ranks)]

    for ins in order:  # the operation behind ``ins`` is looked up only to name it
        r = ins.rank
        sp, rp = ins.sp, ins.rp
        t = ins.recvtb if rp >= 0 else ins.sendtb  # -1 (left out): the rank's spare threadblock
        inst = ins.inst
        c = ins.ch if ins.ch >= 0 else 0
        key = (t, inst)
        tb = tbs[r].get(key)
        if tb is None:
            ch = (c, inst)
            tb = tbs[r][key] = Tb(r, key, ch)
            tb.chan_op = ops[ins.seq]
            keys.add(ch)
        elif tb.channel[0] != c:  # its channel's instance is ``inst`` too: it is in the key
            _conflict(r, t, "channel", tb.channel[0], c, tb.chan_op, ops[ins.seq])
        if sp >= 0:
            if tb.send_peer < 0:
                tb.send_peer, tb.send_op = sp, ops[ins.seq]
            elif tb.send_peer != sp:
                _conflict(r, t, "send peer", tb.send_peer, sp, tb.send_op, ops[ins.seq])
        if rp >= 0:
            if tb.recv_peer < 0:
                tb.recv_peer, tb.recv_op = rp, ops[ins.seq]
            elif tb.recv_peer != rp:
                _conflict(r, t, "receive peer", tb.recv_peer, rp, tb.recv_op, ops[ins.seq])
        ins.tb = tb
        steps = tb.steps
        ins.step = len(steps)
        steps.append(ins)

    out = []
    for r in range(num_ranks):
        seen_send: dict = {}
        seen_recv: dict = {}
        for tb in tbs[r].values():
            for peer, seen, what, top in ((tb.send_peer, seen_send, "send to", tb.send_op),
                                          (tb.recv_peer, seen_recv, "receive from", tb.recv_op)):
                if peer < 0:
                    continue
                other = seen.get((tb.channel, peer))
                if other is not None:
                    oop = other.send_op if what == "send to" else other.recv_op
                    raise ProgramError(
                        f"{_tb_name(other.key[0])} and {_tb_name(tb.key[0])} on rank {r} both "
                        f"{what} rank {peer} on channel {tb.channel[0]}; one connection needs "
                        f"one threadblock (first: {oop.describe()} at {oop.where})",
                        top.file, top.line)
                seen[(tb.channel, peer)] = tb
        out.append(list(tbs[r].values()))
    return out


def _conflict(rank, t, what, old, new, first: Op, second: Op):
    raise ProgramError(
        f"{_tb_name(t)} on rank {rank} gets {what} {new} here but {what} {old} from "
        f"{first.describe()} at {first.where}", second.file, second.line)


def _tb_name(t: int) -> str:
    return (f"manual threadblock {t}" if t >= 0 else
            "the threadblock of operations without sendtb/recvtb")
