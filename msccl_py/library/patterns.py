"""Communication patterns the library programs compose, written with the DSL.

Each function issues DSL calls inside an open ``MSCCLProgram`` and must be
called there. Blocks are addressed through ``index(j)`` (the first chunk of
block ``j``) and ``size`` so one ring or butterfly serves allreduce,
reduce-scatter, allgather and hierarchical programs alike.

>>> from msccl_py.language import MSCCLProgram
>>> from msccl_py.language.collectives import AllReduce
>>> from msccl_py.topologies import fully_connected
>>> with MSCCLProgram("ring", fully_connected(4), AllReduce(4, 4, True), 1) as prog:
...     ring_reduce_scatter([0, 1, 2, 3], Buffer.input, lambda j: j)
...     ring_allgather([0, 1, 2, 3], Buffer.input, lambda j: j)
>>> prog.check()
True
"""

from __future__ import annotations

from typing import Callable

from msccl_py.errors import ProgramError
from msccl_py.language import Buffer, chunk
from msccl_py.library.spec import Param

#: the most chunks one copy of the patterns moves: steps must stay below the runtimes'
#: ``cnt`` bound (72), so longer ranges go in pieces
MAX_PIECE = 64

#: the ``channels`` parameter of ring programs, their ``spread``: rings the blocks are
#: dealt to; unset, the library picks the fewest that fit the target's steps per threadblock
RINGS = Param("channels", int, None, "rings the blocks are dealt to (auto: the fewest that "
              "fit the target)", low=1, high=32)


#: the ``inplace`` parameter by operation, saying what in place means for its buffers
INPLACE = {
    "allreduce": Param("inplace", bool, True, "input and output are one buffer"),
    "allgather": Param("inplace", bool, False, "input is the rank's block of the output"),
    "reduce_scatter": Param("inplace", bool, True, "the output is the rank's block of the input"),
}

#: the ``gpus_per_node`` parameter of hierarchical programs (unset: ``spec.default_split``)
GPUS_PER_NODE = Param("gpus_per_node", int, None, "GPUs per node", low=1)


def rings_check(num_ranks: int, values: dict) -> str | None:
    """Rank check of ring programs: no more rings than blocks.

    >>> rings_check(4, {"channels": 8})
    'channels (8) cannot exceed the rank count 4'
    """
    rings = values.get("channels")
    if rings is not None and rings > num_ranks:
        return f"channels ({rings}) cannot exceed the rank count {num_ranks}"
    return None


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, ...

    >>> [n for n in range(1, 9) if is_power_of_two(n)]
    [1, 2, 4, 8]
    """
    return n > 0 and not n & (n - 1)


def require_power_of_two(what: str, n: int) -> None:
    """Raise a :class:`ProgramError` naming ``what`` unless ``n`` is a power of two.

    >>> require_power_of_two("recursive doubling", 6)
    Traceback (most recent call last):
    ...
    msccl_py.errors.ProgramError: recursive doubling needs a power-of-two rank count, got 6
    """
    if not is_power_of_two(n):
        raise ProgramError(f"{what} needs a power-of-two rank count, got {n}")


def require_ranks(what: str, n: int, minimum: int = 2, power_of_two: bool = False) -> None:
    """Raise unless ``n`` is an integer rank count of at least ``minimum`` (and, with
    ``power_of_two``, a power of two: :func:`require_power_of_two`).

    >>> require_ranks("ring", 1, minimum=1)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < minimum:
        raise ProgramError(f"{what} needs at least {minimum} ranks, got {n!r}")
    if power_of_two:
        require_power_of_two(what, n)


def pair_channel(src: int, dst: int, base: int = 0) -> int:
    """Channel for a transfer that keeps the two directions of a rank pair apart.

    The compiler gives a rank one threadblock per (channel, peer) and runs its
    steps in program order; if both directions shared one, a rank would have
    to finish receiving from its partner before sending to it, doubling the
    rounds of every exchange. Upward transfers use ``base``, downward ones
    ``base + 1``.

    >>> pair_channel(0, 1), pair_channel(1, 0)
    (0, 1)
    """
    return base if src < dst else base + 1


def _ring_channel(m: int, src: int, dst: int, ch: int, piece: int) -> int:
    """Each piece rides its own ring of channels; a two-rank ring splits directions too.

    A ring whose every rank has two transfers in flight on one connection
    fills the FIFOs (a Simple-protocol FIFO holds two) and then every rank
    waits to send before it receives; separate channels keep the pieces apart.
    """
    if m == 2:
        return pair_channel(src, dst, ch + 2 * piece)
    return ch + piece


def _ring_base(m: int, j: int, ch: int, pieces: int, rings: int) -> int:
    """First channel of block ``j`` when blocks are dealt round-robin to ``rings`` rings.

    Each rank's threadblock on a ring's channel then holds about 1/``rings``
    of the ring's steps, which keeps long rings within a runtime's steps per
    threadblock.

    >>> [_ring_base(4, j, 0, 1, 2) for j in range(4)], _ring_base(2, 1, 0, 1, 2)
    ([0, 1, 0, 1], 2)
    """
    return ch + (j % rings) * (2 * pieces if m == 2 else pieces)


def ring_reduce_scatter(ranks: list[int], buffer, index: Callable[[int], int], size: int = 1,
                        ch: int = 0, pieces: int = 1, rings: int = 1) -> None:
    """Reduce block ``j`` of every rank in ``ranks`` onto ``ranks[j]`` around the ring.

    Block ``j`` (``pieces`` consecutive pieces of ``size`` chunks from
    ``index(j)``) starts at ``ranks[j+1]`` and travels ``len(ranks)-1`` hops,
    each hop adding the next rank's contribution. Calls are issued round by
    round so each rank's threadblock sends round k before receiving round k;
    piece ``p`` uses channel ``ch + p`` (see :func:`_ring_channel`), and with
    ``rings`` > 1 block ``j`` rides ring ``j % rings`` (see :func:`_ring_base`).
    """
    m = len(ranks)
    for step in range(1, m):
        for j in range(m):
            src, dst = ranks[(j + step) % m], ranks[(j + step + 1) % m]
            base = _ring_base(m, j, ch, pieces, rings)
            for p in range(pieces):
                at = index(j) + p * size
                chunk(dst, buffer, at, size).reduce(chunk(src, buffer, at, size),
                                                    ch=_ring_channel(m, src, dst, base, p))


def ring_allgather(ranks: list[int], buffer, index: Callable[[int], int], size: int = 1,
                   ch: int = 0, pieces: int = 1, rings: int = 1) -> None:
    """Copy block ``j`` from ``ranks[j]`` to every other rank of the ring (``m-1`` hops);
    channels as in :func:`ring_reduce_scatter`."""
    m = len(ranks)
    for step in range(m - 1):
        for j in range(m):
            src, dst = ranks[(j + step) % m], ranks[(j + step + 1) % m]
            base = _ring_base(m, j, ch, pieces, rings)
            for p in range(pieces):
                at = index(j) + p * size
                chunk(src, buffer, at, size).copy(dst, buffer, at,
                                                  ch=_ring_channel(m, src, dst, base, p))


def halving_reduce_scatter(n: int, buffer, unit: int = 1) -> None:
    """Recursive halving over ``n`` (a power of two) ranks: rank r ends with block r reduced.

    In each of the log2(n) rounds a rank sends the half of its current range
    its partner keeps and reduces the half it keeps.

    >>> from msccl_py.language import MSCCLProgram
    >>> from msccl_py.language.collectives import AllReduce
    >>> from msccl_py.topologies import fully_connected
    >>> with MSCCLProgram("rhd", fully_connected(4), AllReduce(4, 4, True), 1) as prog:
    ...     halving_reduce_scatter(4, Buffer.input)
    ...     doubling_allgather(4, Buffer.input)
    >>> prog.check()
    True
    """
    require_power_of_two("recursive halving", n)
    count = n // 2
    while count >= 1:
        for rank in range(n):
            peer = rank ^ count
            first = (peer // count) * count
            chunk(peer, buffer, first * unit, count * unit).reduce(
                chunk(rank, buffer, first * unit, count * unit), ch=pair_channel(rank, peer))
        count //= 2


def doubling_allgather(n: int, buffer, unit: int = 1) -> None:
    """Recursive doubling over ``n`` (a power of two) ranks: block r of rank r reaches all."""
    require_power_of_two("recursive doubling", n)
    count = 1
    while count < n:
        for rank in range(n):
            peer = rank ^ count
            first = (rank // count) * count
            chunk(rank, buffer, first * unit, count * unit).copy(peer, buffer, first * unit,
                                                                 ch=pair_channel(rank, peer))
        count *= 2


def allpairs_reduce_scatter(ranks: list[int], buffer, index: Callable[[int], int],
                            size: int = 1, scratch: str = "allpairs", into=None) -> None:
    """Every rank sends block ``j`` straight to ``ranks[j]``, which reduces the arrivals.

    One communication step; arrivals land in a scratch buffer so they can be
    received concurrently and summed locally. Every transfer uses channel 0:
    each connection gets its own threadblock anyway, and one channel lets a
    rank with more peers than a runtime has threadblocks pair a send with a
    receive in one. The sum lands in block ``j`` itself, or with ``into`` (out
    of place) at chunk 0 of that buffer, where each rank first copies its block.

    >>> from msccl_py.language import MSCCLProgram
    >>> from msccl_py.language.collectives import AllReduce
    >>> from msccl_py.topologies import fully_connected
    >>> with MSCCLProgram("ap", fully_connected(3), AllReduce(3, 3, True), 1) as prog:
    ...     allpairs_reduce_scatter([0, 1, 2], Buffer.input, lambda j: j)
    ...     allpairs_allgather([0, 1, 2], Buffer.input, lambda j: j)
    >>> prog.check()
    True
    """
    m = len(ranks)
    if into is not None:
        for j in range(m):
            chunk(ranks[j], buffer, index(j), size).copy(ranks[j], into, 0)
    for a in range(m):
        for j in range(m):
            if j != a:
                chunk(ranks[a], buffer, index(j), size).copy(ranks[j], scratch, a * size)
    for j in range(m):
        total = (buffer, index(j)) if into is None else (into, 0)
        for a in range(m):
            if a != j:
                chunk(ranks[j], *total, size).reduce(chunk(ranks[j], scratch, a * size, size))


def allpairs_allgather(ranks: list[int], buffer, index: Callable[[int], int],
                       size: int = 1, ch: int = 0) -> None:
    """``ranks[j]`` sends block ``j`` directly to every other rank (one step, one channel as in
    :func:`allpairs_reduce_scatter`: ``ch``)."""
    for j, src in enumerate(ranks):
        for dst in ranks:
            if dst != src:
                chunk(src, buffer, index(j), size).copy(dst, buffer, index(j), ch=ch)


def binomial_rounds(n: int) -> list[list[tuple[int, int]]]:
    """(parent, child) pairs of relative ranks per round of a binomial tree over ``n`` ranks.

    Round ``k`` pairs ``v`` with ``v + 2**k`` for ``v`` a multiple of
    ``2**(k+1)``, leaf-to-root order (reverse it to broadcast). Works for any
    ``n``: missing children are skipped, so there are ceil(log2 n) rounds.

    >>> binomial_rounds(5)
    [[(0, 1), (2, 3)], [(0, 2)], [(0, 4)]]
    """
    rounds = []
    distance = 1
    while distance < n:
        rounds.append([(v, v + distance) for v in range(0, n, 2 * distance)
                       if v + distance < n])
        distance *= 2
    return rounds


def subtree_span(n: int, child: int, distance: int) -> int:
    """Relative ranks in the subtree of ``child`` joined at ``distance`` (clipped at ``n``).

    >>> subtree_span(8, 4, 4), subtree_span(6, 4, 4)
    (4, 2)
    """
    return min(distance, n - child)


def work_buffer(num_ranks: int, chunks: int, inplace: bool, name: str = "work"):
    """The buffer a reduction runs in without touching an out-of-place call's input.

    In place: the input. Out of place: a scratch buffer holding a copy of the
    input (``chunks`` chunks per rank), made before any communication.

    >>> from msccl_py.language import MSCCLProgram
    >>> from msccl_py.language.collectives import AllReduce
    >>> from msccl_py.topologies import fully_connected
    >>> with MSCCLProgram("w", fully_connected(2), AllReduce(2, 2, False), 1) as prog:
    ...     work_buffer(2, 2, inplace=False)
    'work'
    """
    if inplace:
        return Buffer.input
    for rank in range(num_ranks):
        copy_range(rank, Buffer.input, 0, chunks, rank, name, 0)
    return name


def output_buffer(num_ranks: int, chunks: int, inplace: bool):
    """The buffer an allreduce works in without writing an out-of-place call's input.

    In place: the input. Out of place: the output, after every rank copied its
    ``chunks`` input chunks there (in pieces, :func:`copy_range`, so that a
    program over 72 chunks or more keeps within the runtimes' count bound),
    before any communication.

    >>> from msccl_py.language import MSCCLProgram
    >>> from msccl_py.language.collectives import AllReduce
    >>> from msccl_py.topologies import fully_connected
    >>> with MSCCLProgram("o", fully_connected(2), AllReduce(2, 2, False), 1) as prog:
    ...     work = output_buffer(2, 2, inplace=False)
    ...     allpairs_reduce_scatter([0, 1], work, lambda j: j)
    ...     allpairs_allgather([0, 1], work, lambda j: j)
    >>> work == Buffer.output, prog.check()
    (True, True)
    """
    if inplace:
        return Buffer.input
    for rank in range(num_ranks):
        copy_range(rank, Buffer.input, 0, chunks, rank, Buffer.output, 0)
    return Buffer.output


def input_to_block(num_ranks: int, inplace: bool) -> None:
    """Before an allgather: out of place, rank ``r``'s input chunk becomes chunk ``r`` of its
    output (in place it already is)."""
    if not inplace:
        for rank in range(num_ranks):
            chunk(rank, Buffer.input, 0).copy(rank, Buffer.output, rank)


def block_to_output(num_ranks: int, buffer, chunks: int, inplace: bool) -> None:
    """After a reduce-scatter in ``buffer``: out of place, rank ``r``'s reduced block (``chunks``
    chunks from ``r * chunks``) becomes its output (in place it already is)."""
    if not inplace:
        for rank in range(num_ranks):
            chunk(rank, buffer, rank * chunks, chunks).copy(rank, Buffer.output, 0)


def copy_range(src: int, src_buf, src_index: int, size: int, dst: int, dst_buf, dst_index: int,
               **kwargs) -> None:
    """Copy ``size`` chunks in pieces of at most :data:`MAX_PIECE` (the runtimes' step count
    bound); ``kwargs`` go to every ``copy``."""
    for at in range(0, size, MAX_PIECE):
        n = min(MAX_PIECE, size - at)
        chunk(src, src_buf, src_index + at, n).copy(dst, dst_buf, dst_index + at, **kwargs)
