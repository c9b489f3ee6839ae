"""A rank's connections to ranks on other hosts: FIFO slots carried over an engine.

In a joined group (ranks started by torchrun or mpirun, see
:mod:`msccl_py.comm.join`) every host has its own arena. A connection whose
two ranks share a host works as always. For one that crosses hosts, each
side's arena holds a copy of the connection's FIFO and counters, and the
rank's :class:`Link` stands in for the remote peer, so neither executor
changes:

* the sender's executor writes a slot and advances ``tail`` in its arena;
  its link ships the slot (a frame over the engine, straight from FIFO
  memory) to the receiver's link, which receives it into the same slot of
  its own arena and advances ``tail`` there;
* the receiver's executor consumes and advances ``head``; its link sends the
  new ``head`` back as a credit, which the sender's link stores in the
  sender's arena. A sender therefore never has more than the FIFO's capacity
  in flight: the FIFO semantics, and the deadlock regimes the verifier
  reports, are those of one host.

Call descriptors travel too: on every call a link sends its rank's
descriptor to every remote rank, and writes what it receives into a mirror
record in its arena (``Layout.mirror``), where the executors read a remote
peer's words. The executors ring the link's doorbell (the semaphore they
post for a remote peer) after each transfer; the link posts its rank's
semaphore when a frame moves something the rank sleeps on. A failure on any
host is forwarded to all of them (an abort frame).

Each link runs two threads: a sender (sleeps on its doorbell) and a receiver
(blocks in the engine for the next frame).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from msccl_py.errors import MscclRuntimeError
from msccl_py.transport import shm_arena as A
from msccl_py.runtime.shm_control import DESC_FIELDS, bit
from msccl_py.runtime.shm_threadblocks import CallTemplate, TbState
from msccl_py.transport.engines import HEADER_WORDS, EngineClosed

#: frame kinds (header word 0)
ENTER, DATA, CREDIT, ABORT, STOP = range(1, 6)
#: header words: kind, sender rank, then per kind
H_KIND, H_FROM, H_A, H_B, H_C, H_DESC = 0, 1, 2, 3, 4, 5
_IDLE = 0.1
#: seconds a failed group's link waits at close for its receiver to end
_FAILED_GRACE = 3.0


def transfer_sizes(tb: TbState, call: CallTemplate, S: int, send: bool) -> list[int]:
    """Elements of each transfer ``tb`` puts into its send FIFO (``send``) or takes from its
    receive FIFO in one call, in order (the executors' arithmetic)."""
    steps = [st for st in tb.prog.steps if (st.send if send else st.recv)]
    mac, L, sizes = call.max_count, call.iter_elems, []
    for it in range(call.iterations):
        ln = min(L, S - it * L)
        for st in steps:
            cnt = st.count
            ntr = -(-cnt // mac) if cnt > 0 else 1
            for j in range(ntr):
                k = min(mac, cnt - j * mac)
                sizes.append((k - 1) * S + ln if k > 0 else 0)
    return sizes


@dataclass(eq=False)
class _Out:
    peer: int
    conn: int
    tail_w: int
    fifo: np.ndarray
    sizes: list[int]
    start: int
    shipped: int


@dataclass(eq=False)
class _In:
    peer: int
    conn: int
    tail_w: int
    head_w: int
    fifo: np.ndarray
    end: int
    received: int
    credited: int


class _Call:
    def __init__(self, outs: list[_Out], ins: list[_In]):
        self.outs, self.ins = outs, ins
        self.by_conn = {i.conn: i for i in ins}
        self.done = threading.Event()
        if not outs and not ins:
            self.done.set()


class Link:
    """Rank ``rt.rank``'s connections to the ``remote`` ranks, over ``engine``.

    ``doorbell`` is the semaphore the executors post for a remote peer;
    ``wake_all`` the semaphores to post when a remote failure arrives (every
    rank's and link's on this host).
    """

    def __init__(self, rt, engine, remote: frozenset[int], doorbell, wake_all: list):
        self.rt, self.engine, self.remote = rt, engine, frozenset(remote)
        self.doorbell, self.wake_all = doorbell, wake_all
        self.words = rt.words
        lay = rt.layout
        self.rank = rt.rank
        self.me = bit(rt.rank)
        self.my_sleep = lay.sleep_word(rt.rank)
        self._call: _Call | None = None
        self._entered = 0
        self._sizes: dict[tuple, tuple] = {}
        self._forwarded = False
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.transfers_sent = 0
        self.bytes_sent = 0
        for p in self.remote:
            # the executors post the doorbell for every transfer with a remote peer
            self.words[lay.mirror(self.rank, p) + A.REC_SLEEP] = self.me
        self._sender = threading.Thread(target=self._send_loop, name="msccl_py-link-send",
                                        daemon=True)
        self._receiver = threading.Thread(target=self._recv_loop, name="msccl_py-link-recv",
                                          daemon=True)
        self._sender.start()
        self._receiver.start()

    # ----- the rank's calls (main thread) ----------------------------------------------
    def begin(self, call: CallTemplate | None, S: int = 0) -> None:
        """The rank entered its current call (``rt.seq``); ``call``: the shape it runs (chunks
        of ``S`` elements), whose remote connections this link serves until :meth:`end`
        (None: a barrier)."""
        rt = self.rt
        self._check()
        if call is not None:
            outs, ins, w = [], [], self.words
            for st in call.tbs:
                if st.speer in self.remote and st.sfifo is not None:
                    sizes = self._transfer_sizes(call, S, st, True)
                    start = int(w[st.stail_w])
                    outs.append(_Out(st.speer, st.prog.send_conn, st.stail_w, st.sfifo, sizes,
                                     start, start))
                if st.rpeer in self.remote and st.rfifo is not None:
                    n = len(self._transfer_sizes(call, S, st, False))
                    head = int(w[st.rhead_w])
                    ins.append(_In(st.rpeer, st.prog.recv_conn, st.rtail_w, st.rhead_w,
                                   st.rfifo, head + n, head, head))
            self._call = _Call(outs, ins)
        self._enter(rt.seq)
        if call is not None:
            self.doorbell.release()

    def end(self) -> None:
        """Wait until the call's slots are shipped and its credits sent."""
        state = self._call
        if state is None:
            return
        while not state.done.wait(_IDLE):
            self._check()
            if self.words[0]:
                self.rt._aborted(lambda: "its link waits to ship the call's last transfers")
        self._call = None

    def cancel(self) -> None:
        self._call = None

    def leave(self, seq: int) -> None:
        """A call that ran nothing still tells the remote ranks it happened."""
        if self._entered < seq:
            self._enter(seq)

    def _enter(self, seq: int) -> None:
        hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
        hdr[H_KIND], hdr[H_FROM], hdr[H_A] = ENTER, self.rank, seq
        hdr[H_DESC:H_DESC + DESC_FIELDS] = self.rt.desc
        for p in sorted(self.remote):
            self.engine.send(p, hdr)
        self._entered = seq

    def _transfer_sizes(self, call: CallTemplate, S: int, st: TbState, send: bool
                        ) -> list[int]:
        key = (id(call), S, st.idx, send)
        hit = self._sizes.get(key)
        if hit is None or hit[0] is not call:
            if len(self._sizes) > 512:
                self._sizes.clear()
            hit = self._sizes[key] = (call, transfer_sizes(st, call, S, send))
        return hit[1]

    def _check(self) -> None:
        if self.error is not None:
            raise MscclRuntimeError(f"rank {self.rank}: the link to other hosts failed: "
                                    f"{self.error}") from self.error

    # ----- sender thread ----------------------------------------------------------------
    def _send_loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.doorbell.acquire(True, _IDLE)
                if self.words[0] and not self._forwarded:
                    self._forward_abort()
                state = self._call
                if state is not None and not state.done.is_set():
                    self._pump(state)
        except BaseException as exc:    # the rank must hear of it
            self._failed(exc)

    def _pump(self, state: _Call) -> None:
        w, engine = self.words, self.engine
        finished = True
        for o in state.outs:
            tail = int(w[o.tail_w])
            cap = len(o.fifo)
            while o.shipped < tail:
                n = o.sizes[o.shipped - o.start]
                hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
                hdr[H_KIND], hdr[H_FROM], hdr[H_A], hdr[H_B], hdr[H_C] = \
                    DATA, self.rank, o.conn, o.shipped, n
                engine.send(o.peer, hdr, o.fifo[o.shipped % cap][:n])
                self.transfers_sent += 1
                self.bytes_sent += n * o.fifo.itemsize
                o.shipped += 1
            finished &= o.shipped - o.start == len(o.sizes)
        for i in state.ins:
            head = int(w[i.head_w])
            if head > i.credited:
                hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
                hdr[H_KIND], hdr[H_FROM], hdr[H_A], hdr[H_B] = CREDIT, self.rank, i.conn, head
                engine.send(i.peer, hdr)
                i.credited = head
            finished &= i.credited >= i.end
        if finished:
            state.done.set()

    def _goodbye(self) -> None:
        """STOP, this link's last frame, to every remote rank."""
        hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
        hdr[H_KIND], hdr[H_FROM] = STOP, self.rank
        failure = None
        for p in sorted(self.remote):
            try:
                self.engine.send(p, hdr)
            except EngineClosed as exc:   # that one is gone: tell the others all the same
                failure = failure or exc
        if failure is not None:
            raise failure

    def _forward_abort(self) -> None:
        self._forwarded = True
        code, origin, text = self.rt.abort_message()
        raw = np.frombuffer(text.encode("utf-8", "replace")[:A.MSG_BYTES], dtype=np.uint8)
        hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
        hdr[H_KIND], hdr[H_FROM], hdr[H_A], hdr[H_B], hdr[H_C] = \
            ABORT, self.rank, code, origin, raw.size
        for p in sorted(self.remote):
            try:
                self.engine.send(p, hdr, raw.copy())
            except MscclRuntimeError:
                pass    # that host may be gone already

    # ----- receiver thread --------------------------------------------------------------
    def _recv_loop(self) -> None:
        hdr = np.zeros(HEADER_WORDS, dtype=np.int64)
        stopped: set[int] = set()
        try:
            while True:
                peer = self.engine.recv_header(hdr)
                kind = int(hdr[H_KIND])
                if kind == STOP:
                    stopped.add(peer)
                    if stopped >= self.remote:
                        return
                    continue
                if kind == DATA:
                    self._data(peer, hdr)
                elif kind == CREDIT:
                    w = self.words
                    head_w = self.rt.layout.head_word(int(hdr[H_A]))
                    if hdr[H_B] > w[head_w]:
                        w[head_w] = int(hdr[H_B])
                    self._wake(peer)
                elif kind == ENTER:
                    self._mirror(peer, int(hdr[H_A]), hdr[H_DESC:H_DESC + DESC_FIELDS])
                elif kind == ABORT:
                    raw = np.zeros(int(hdr[H_C]), dtype=np.uint8)
                    self.engine.recv_payload(peer, raw)
                    self._remote_abort(peer, int(hdr[H_A]), int(hdr[H_B]),
                                       raw.tobytes().decode("utf-8", "replace"))
                else:
                    raise MscclRuntimeError(f"rank {self.rank}: unknown frame kind {kind} from "
                                            f"rank {peer}")
        except EngineClosed as exc:
            if not self._stop.is_set():
                self._failed(exc)
        except BaseException as exc:
            self._failed(exc)

    def _data(self, peer: int, hdr: np.ndarray) -> None:
        conn, k, n = int(hdr[H_A]), int(hdr[H_B]), int(hdr[H_C])
        state = self._call
        slot = state.by_conn.get(conn) if state is not None else None
        if slot is None or slot.peer != peer or k != slot.received or \
                n > slot.fifo.shape[1]:
            raise MscclRuntimeError(
                f"rank {self.rank}: rank {peer} sent transfer #{k} of {n} elements on "
                f"connection {conn}, which rank {self.rank}'s call #{self.rt.seq} does not "
                f"expect (mismatched calls across hosts?)")
        self.engine.recv_payload(peer, slot.fifo[k % len(slot.fifo)][:n])
        slot.received = k + 1
        self.words[slot.tail_w] = k + 1
        self._wake(peer)

    def _mirror(self, peer: int, seq: int, desc: np.ndarray) -> None:
        """Write ``peer``'s descriptor of call ``seq`` where this rank reads it."""
        w = self.words
        base = self.rt.layout.mirror(self.rank, peer)
        slot = base + A.LINE + (seq % A.HIST) * A.DESC_WORDS
        for j in range(DESC_FIELDS):
            w[slot + 1 + j] = int(desc[j])
        w[slot] = seq
        w[base + A.REC_SEQ] = seq
        self._wake(peer)

    def _remote_abort(self, peer: int, code: int, origin: int, text: str) -> None:
        self._forwarded = True      # it came from there: no need to send it back
        self.rt.abort(code or A.ABORT_ERROR, f"{text} (reported by rank {peer} on another "
                                             f"host)" if origin != peer else text,
                      origin=origin)
        for sem in self.wake_all:
            sem.release()

    def _wake(self, peer: int) -> None:
        if self.words[self.my_sleep] & bit(peer):
            self.rt.sem.release()

    def _failed(self, exc: BaseException) -> None:
        if self._stop.is_set():
            return
        self.error = exc
        if isinstance(exc, EngineClosed):   # which rank is gone the engine cannot say
            self.rt.abort(A.ABORT_DIED, f"rank {self.rank} lost its connection to another host "
                                        f"(a rank there died or its host went away): {exc}",
                          origin=-1)
        else:
            self.rt.abort(A.ABORT_DIED, f"rank {self.rank}'s link to other hosts failed: {exc}")
        for sem in self.wake_all:
            sem.release()

    # ----- teardown ---------------------------------------------------------------------
    def close(self) -> None:
        """Deliver what is in flight and stop both threads. Every rank of the group closes:
        each sends STOP to every remote rank, and a receiver stops once it has one from each
        (a peer's STOP is its last frame). After a failure (the group aborted, or this link
        broke) there is nobody to say goodbye to: the threads just stop."""
        if self._stop.is_set():
            return
        try:
            if self.error is None and not self.words[0]:
                try:
                    self.engine.flush()
                    self._goodbye()
                    self.engine.flush()
                except EngineClosed as exc:
                    raise MscclRuntimeError(f"rank {self.rank}: leaving the group, the link to "
                                            f"other hosts failed: {exc}") from None
                self._receiver.join(30)
            else:
                # the receiver may be blocked inside the engine (gloo's wait, in C++): if it
                # woke there while the interpreter shuts down (a peer's STOP, or its socket
                # closing as it dies), the process would abort ("terminate called without
                # an active exception"). Say goodbye anyway and let it end first: every
                # remote rank either closes too (its STOP arrives) or is gone (its
                # connection breaks), both of which end the receiver.
                try:
                    self._goodbye()
                except MscclRuntimeError:
                    pass
                self._receiver.join(_FAILED_GRACE)
        finally:
            self._stop.set()
            self.doorbell.release()
            self._sender.join(5)
