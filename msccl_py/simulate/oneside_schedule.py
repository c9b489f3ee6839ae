"""One call of an MSCCL++ plan in time order: threadblocks, their waits, and the proxies.

:class:`Schedule` takes every threadblock's operations as :class:`Op` records
(what each waits for, how long it runs at the threadblock's static rates, what
it hands to a port channel's proxy, what it leaves for others) and runs them:

* a threadblock runs its next operation as soon as what it waits for has
  happened (a signal, LL packets, a semaphore release, a barrier's last
  member, its port channels' transfers for ``flush``), and sleeps under that
  thing's key until then;
* a port channel's proxy moves its transfers one after another (the
  executor gives each channel its own queue pair, which keeps them in
  order); the transfers of all channels in flight share their resources max-min
  fairly as they start and end (:class:`~msccl_py.simulate.flows.Flows`), and
  a signal, LL packets or ``flush`` behind a transfer on the same channel
  happen once it has crossed.

Everything happens in time order (a heap of threadblock wake-ups and the next
proxy transfer to end), and a threadblock runs ahead without the heap while
nothing else can happen first, so a call costs about one heap operation per
wait.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from msccl_py.errors import SimulationError
from msccl_py.mscclpp_ir import Plan
from msccl_py.simulate.flows import Flows

#: what an operation waits for (``Op.kind``)
PLAIN, WAIT, FLUSH, BARRIER, ACQUIRE, PACKETS = range(6)


class Op(NamedTuple):
    """One step of a threadblock, ready to time: plan operation ``op`` (``index`` in its
    threadblock, the pipeline's when inside one), ``dur`` µs of its own work at scale 1,
    ``alpha`` its memory-channel transfers' largest path α (-1: none), ``proxy`` its
    port transfers ``((rank, channel), src, dst, bytes)``, ``effects`` whether it leaves
    signals, packets or releases, ``drain`` the port channels it waits to empty (pwsf)."""

    op: object
    index: int
    kind: int
    dur: float
    alpha: float
    proxy: tuple
    effects: bool
    drain: tuple


@dataclass
class Outcome:
    """When the call ends (µs), each threadblock's busy time, the longest hop chain."""

    end: float
    busy: list[float]
    hops: int


class Schedule:
    """Runs ``ops`` (per threadblock, in order) of ``plan`` on ``tbs`` ((rank, block) pairs);
    ``rates`` gives paths, α and the proxies' resource capacities."""

    def __init__(self, plan: Plan, tbs: list, ops: list[list[Op]], rates, alpha_of):
        self.plan, self.tbs, self.ops, self.rates, self.alpha_of = plan, tbs, ops, rates, alpha_of
        self.pair = pair_channels(plan)
        n = len(tbs)
        self.clock, self.hops, self.busy, self.pos = [0.0] * n, [0] * n, [0.0] * n, [0] * n
        self.signals: dict = defaultdict(deque)   # (rank, type, channel) -> (arrival, hops)
        self.packets: dict = defaultdict(list)    # (rank, buffer, chunk) -> [(arrival, hops)]
        self.barriers: dict = {}
        self.sems: dict = defaultdict(deque)
        self.queues: dict = defaultdict(deque)    # (rank, port channel) -> proxy items in order
        self.port_done: dict = defaultdict(float)  # (rank, port channel) -> its last transfer's end
        self.asleep: dict = defaultdict(list)     # key -> blocks waiting for it
        self.committed: dict = {}                 # block -> (start, hops) of its next operation
        self.drain: dict = {}                     # block -> port channels it waits to empty
        self.heap: list = []
        self.flows = Flows(rates.proxy_capacity)
        self.now = 0.0
        self.scale = 1.0

    def run(self, scale: float = 1.0) -> Outcome:
        """Run the call once; ``scale`` multiplies every byte (0: only latencies count)."""
        self.scale = scale
        self.heap = [(0.0, g) for g in range(len(self.tbs))]
        heapq.heapify(self.heap)
        while True:
            done = self.flows.next_done()
            if done is not None and (not self.heap or done[0] <= self.heap[0][0]):
                self.now = done[0]
                self.flows.advance(self.now)
                self._proxy_done(done[1])
                continue
            if not self.heap:
                break
            self.now, g = heapq.heappop(self.heap)
            self._step(g)
        for g, ops in enumerate(self.ops):
            if self.pos[g] < len(ops):
                op = ops[self.pos[g]]
                raise SimulationError(
                    f"MSCCL++ plan {self.plan.name!r} never finishes: rank {self.tbs[g][0]} "
                    f"threadblock {self.tbs[g][1].id} op {op.index} ({op.op.name}) waits "
                    f"forever (verify it: `msccl-py verify`)")
        return Outcome(max(self.clock, default=0.0), self.busy, max(self.hops, default=0))

    def _wake(self, key) -> None:
        for g in self.asleep.pop(key, ()):
            heapq.heappush(self.heap, (self.now, g))

    def _horizon(self) -> float:
        """When the next thing other than the running block happens."""
        done = self.flows.next_done()
        t = done[0] if done is not None else np.inf
        return min(t, self.heap[0][0]) if self.heap else t

    def _step(self, g: int) -> None:
        """Run block ``g`` from now until it must wait or something else happens first."""
        rank = self.tbs[g][0]
        ops = self.ops[g]
        while True:
            if g in self.drain:
                busy = [c for c in self.drain[g] if self.queues[(rank, c)]]
                if busy:
                    self.asleep[("port", rank, busy[0])].append(g)
                    return
                del self.drain[g]
                self.clock[g] = max(self.clock[g], self.now)
            if self.pos[g] == len(ops):
                return
            op = ops[self.pos[g]]
            ready = self.committed.pop(g, None)
            if ready is None:
                ready = (max(self.clock[g], self.now), self.hops[g]) if op.kind == PLAIN \
                    else self._ready(g, rank, op)
            if isinstance(ready[0], str):
                self.asleep[ready].append(g)
                return
            start, h = ready
            if start > self.now:
                if start > self._horizon():
                    # it has taken what it waited for: it runs at ``start``
                    self.committed[g] = ready
                    heapq.heappush(self.heap, (start, g))
                    return
                self.now = start
            end = self._execute(g, rank, op, h)
            if end > self.now:
                heapq.heappush(self.heap, (end, g))
                return

    def _execute(self, g: int, rank: int, op: Op, h: int) -> float:
        dur = op.dur * self.scale
        end = self.now + dur
        for key, src, dst, nbytes in op.proxy:
            self._enqueue(key, ("xfer", src, dst, nbytes * self.scale))
        if op.effects:
            self._effects(rank, op.op, end, end + op.alpha if op.alpha >= 0 else self.now, h)
        if op.drain:
            self.drain[g] = op.drain
        self.busy[g] += dur
        self.clock[g], self.hops[g] = end, h
        self.pos[g] += 1
        return end

    def _ready(self, g: int, rank: int, op: Op) -> tuple:
        """(start time, hop count) of ``op`` on block ``g``, or the key of what it waits for."""
        o = op.op
        start, h = max(self.clock[g], self.now), self.hops[g]
        if op.kind == WAIT:
            queues = [self.signals[(rank, o.channel_type, c)] for c in o.channels]
            for c, q in zip(o.channels, queues):
                if not q:
                    return ("sig", rank, o.channel_type, c)
            for q in queues:
                at, hh = q.popleft()
                start, h = max(start, at), max(h, hh + 1)
            return start, h
        if op.kind == FLUSH:
            for c in o.channels:
                if self.queues[(rank, c)]:
                    return ("port", rank, c)
            return max([start] + [self.port_done[(rank, c)] for c in o.channels]), h
        if op.kind == BARRIER:
            return self._barrier(g, rank, o, start, h)
        if op.kind == ACQUIRE:
            for s in o.semaphores:
                if not self.sems[(rank, s)]:
                    return ("sem", rank, s)
            for s in o.semaphores:
                at, hh = self.sems[(rank, s)].popleft()
                start, h = max(start, at), max(h, hh)
            return start, h
        for ref in o.src[PACKET_READS[o.name]]:
            for c in range(ref.index, ref.index + max(1, ref.size)):
                got = self.packets.get((rank, ref.buffer, c))
                if not got:
                    return ("pkt", rank, ref.buffer, c)
                at, hh = max(got)
                start, h = max(start, at), max(h, hh + 1)
        return start, h

    def _barrier(self, g: int, rank: int, o, start: float, h: int) -> tuple:
        """Every member waits until the last arrives, then all leave together."""
        key = ("bar", rank, o.barrier_id)
        arrived, release = self.barriers.setdefault(key, ({}, []))
        if release and g not in arrived:
            return key                         # the previous round is still leaving
        arrived[g] = arrived.get(g, (start, h))
        if not release and len(arrived) >= (o.num_threadblocks or 1):
            release.append((max(v[0] for v in arrived.values()),
                            max(v[1] for v in arrived.values())))
            self._wake(key)
        if not release:
            return key
        out = release[0]
        del arrived[g]
        if not arrived:
            release.clear()
            self._wake(key)
        return out

    def _effects(self, rank: int, o, end: float, arrive: float, h: int) -> None:
        """Signals, packets and semaphore releases operation ``o`` leaves for others: at once
        for a memory channel, behind the channel's transfers for a port channel."""
        port = o.channel_type == "port"
        if o.name in SIGNALS or o.name in ("pws", "pwsf"):
            for c in o.channels:
                peer, ctype, back = self.pair[(rank, o.channel_type, c)]
                item = ("sig", (peer, ctype, back), end, rank, peer, h)
                if port:
                    self._enqueue((rank, c), item)
                else:
                    self._deliver(item, arrive - self.alpha_of((rank, peer)))
        elif o.name == "sem_release":
            for s in o.semaphores:
                self.sems[(rank, s)].append((end, h))
                self._wake(("sem", rank, s))
        if o.name in PACKET_WRITES:
            chans = iter(o.channels if len(o.channels) > 1 else ())
            for ref in o.dst:
                owner = ref.rank if ref.rank is not None else rank
                keys = [(owner, ref.buffer, c) for c in range(ref.index, ref.index + max(1, ref.size))]
                item = ("pkt", keys, end, rank, owner, h)
                if owner == rank:
                    self._deliver(item, end, local=True)
                elif port:
                    self._enqueue((rank, next(chans, o.channels[0] if o.channels else 0)), item)
                else:
                    self._deliver(item, arrive - self.alpha_of((rank, owner)))

    def _deliver(self, item, at: float, local: bool = False) -> None:
        """A signal or packets leave ``item``'s rank at ``at`` and land after the path's α."""
        kind, key, not_before, src, dst, h = item
        at = max(at, not_before) + (0.0 if local else self.alpha_of((src, dst)))
        if kind == "sig":
            self.signals[key].append((at, h))
            self._wake(("sig",) + key)
        else:
            for k in key:
                self.packets[k].append((at, h))
                self._wake(("pkt",) + k)

    def _enqueue(self, key, item) -> None:
        """Hand ``item`` to the proxy of port channel ``key``: it goes after the channel's
        earlier transfers."""
        q = self.queues[key]
        if item[0] != "xfer" and not q:
            self._deliver(item, self.now)
            return
        q.append(item)
        if len(q) == 1:
            self._start(key)

    def _start(self, key) -> None:
        _, src, dst, nbytes = self.queues[key][0]
        self.flows.advance(self.now)
        self.flows.start(key, nbytes, self.rates.paths[(src, dst)].resources)

    def _proxy_done(self, key) -> None:
        """The head transfer of port channel ``key`` has crossed: what queued behind it goes,
        up to the next transfer, which starts."""
        self.flows.finish(key)
        q = self.queues[key]
        q.popleft()
        self.port_done[key] = self.now
        while q and q[0][0] != "xfer":
            self._deliver(q.popleft(), self.now)
        if q:
            self._start(key)
        else:
            self._wake(("port",) + key)


#: operations that read LL packets (wait for them), and the sources that are packets
PACKET_READS = {"rppkt": slice(0, 1), "upkt": slice(0, 1), "repkt": slice(1, None),
                "respkt": slice(1, None), "recpkt": slice(1, None), "recspkt": slice(1, None)}
#: operations that write LL packets
PACKET_WRITES = ("ppkt", "rppkt", "cpkt", "respkt", "recpkt", "recspkt")
SIGNALS = ("signal", "rlxsignal")
#: operations that leave something for other threadblocks
EFFECTS = frozenset(SIGNALS + PACKET_WRITES + ("pws", "pwsf", "sem_release"))


_KINDS = {"wait": WAIT, "rlxwait": WAIT, "flush": FLUSH, "barrier": BARRIER,
          "sem_acquire": ACQUIRE, **{name: PACKETS for name in PACKET_READS}}


def kind_of(name: str) -> int:
    """What an operation named ``name`` waits for (PLAIN ... PACKETS)."""
    return _KINDS.get(name, PLAIN)


def pair_channels(plan: Plan) -> dict:
    """(rank, type, channel) -> (peer, type, paired channel): the k-th channel of a type from
    A to B meets the k-th one from B to A (the executor's pairing)."""
    ordinal, by_peer = {}, {}
    for g in plan.gpus:
        for t in ("memory", "port"):
            for c, peer in enumerate(g.channel_peers(t)):
                lst = by_peer.setdefault((g.rank, t, peer), [])
                ordinal[(g.rank, t, c)] = (peer, len(lst))
                lst.append(c)
    out = {}
    for (r, t, c), (peer, k) in ordinal.items():
        back = by_peer.get((peer, t, r), [])
        out[(r, t, c)] = (peer, t, back[k] if k < len(back) else None)
    return out
