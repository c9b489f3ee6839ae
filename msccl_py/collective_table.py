"""Every collective the package knows, one entry each: the one place to add a collective.

An entry says what a collective is, and every stage reads it from here: the
IR and the XML reader (names, spellings, root), the DSL (per-rank blocks),
the plan (buffer layout, in-place aliasing), the verifier (symbolic
postcondition), the runtimes (NumPy expected result, ``avg``, call
geometry) and the simulator (busbw factor).

Layouts (``n`` chunks per loop, ``g`` ranks): ``same`` input n, output n;
``gathered`` input n/g, output n (in place: the input is the window at
``rank * n/g`` of the output); ``scattered`` input n, output n/g (in place:
the output is the window at ``rank * n/g`` of the input); ``declared`` the
program declares each rank's counts. In place, ``same`` and ``declared``
collectives' input is their output.

>>> kind("reducescatter").name, KINDS["reduce"].rooted, KINDS["reduce"].reducing
('reduce_scatter', True, True)
>>> KINDS["allreduce"].busbw_factor(8)
1.75
>>> post = KINDS["allgather"].postcondition(2, 2, 0, 100)
>>> post[(1, "o", 1)]
(100,)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce as _fold


#: a collective's traits: ``blocks`` its data is per-rank blocks (replicated instances
#: interleave, never batch); ``splits`` a call's input splits into one block per rank;
#: ``joins`` a call's output is one block per rank; ``root_only`` only the root's output is
#: defined; ``per_rank_chunks`` chunk size = count * ngpus / nchunksperloop (else count /
#: nchunksperloop); ``since_executor`` read by the MSCCL runtimes from msccl-executor on
TRAITS = ("blocks", "splits", "joins", "root_only", "per_rank_chunks", "since_executor")


def _t(*names: str) -> frozenset[str]:
    return frozenset(names)


def _ring_busbw(n: int) -> float:
    return (n - 1) / n


@dataclass(frozen=True)
class CollectiveKind:
    """One collective: names, root, reduction, layout, postcondition, expected result, busbw."""

    name: str
    #: other spellings readers accept (XML ``coll``), mapped to ``name``
    spellings: tuple[str, ...] = ()
    #: the call's name in the communicator and torch API (``all_reduce``)
    api_name: str = ""
    rooted: bool = False
    #: ``op`` folds inputs together (and ``avg`` divides the result by the rank count)
    reducing: bool = False
    #: ``same`` | ``gathered`` | ``scattered`` | ``declared`` (module doc)
    layout: str = "same"
    #: what else holds (:data:`TRAITS`)
    traits: frozenset[str] = frozenset()
    #: nccl-tests' busbw / algbw on n ranks
    busbw: Callable[[int], float] = lambda n: 1.0
    #: ``(n, g, root, stride) -> {(rank, "o", chunk): (origin values)}``, origin (s, k)
    #: written ``s * stride + k``; None: the program's own postcondition
    postcondition: Callable | None = None
    #: ``(arrays, g, root, fold) -> outputs`` in NumPy (``fold`` reduces a list of arrays)
    expected: Callable | None = None

    def busbw_factor(self, nranks: int) -> float:
        return self.busbw(max(1, nranks))


# ------------------------------------------------------------------ symbolic postconditions

def _post_allreduce(n, g, root, stride):
    exp = {}
    for k in range(n):
        v = tuple(s * stride + k for s in range(g))
        for r in range(g):
            exp[(r, "o", k)] = v
    return exp


def _post_allgather(n, g, root, stride):
    ic = n // g
    # one value object per output slot, shared by every rank: the verifier compares each
    # held value with it once (its cache is by identity), not g times
    want = [(s * stride + k,) for s in range(g) for k in range(ic)]
    return {(r, "o", j): v for r in range(g) for j, v in enumerate(want)}


def _post_reduce_scatter(n, g, root, stride):
    oc = n // g
    return {(r, "o", k): tuple(s * stride + r * oc + k for s in range(g))
            for r in range(g) for k in range(oc)}


def _post_alltoall(n, g, root, stride):
    m = n // g
    return {(r, "o", s * m + k): (s * stride + r * m + k,)
            for r in range(g) for s in range(g) for k in range(m)}


def _post_broadcast(n, g, root, stride):
    want = [(root * stride + k,) for k in range(n)]
    return {(r, "o", k): v for r in range(g) for k, v in enumerate(want)}


def _post_reduce(n, g, root, stride):
    return {(root, "o", k): tuple(s * stride + k for s in range(g)) for k in range(n)}


def _post_gather(n, g, root, stride):
    c = n // g
    return {(root, "o", s * c + k): (s * stride + k,) for s in range(g) for k in range(c)}


def _post_scatter(n, g, root, stride):
    c = n // g
    return {(r, "o", k): (root * stride + r * c + k,) for r in range(g) for k in range(c)}


# ------------------------------------------------------------------ NumPy expected results

def _concat(arrs):
    import numpy as np
    return np.concatenate(arrs)


def _exp_allreduce(arrs, g, root, fold):
    total = fold(arrs)
    return [total.copy() for _ in range(g)]


def _exp_allgather(arrs, g, root, fold):
    whole = _concat(arrs)
    return [whole.copy() for _ in range(g)]


def _exp_reduce_scatter(arrs, g, root, fold):
    total = fold(arrs)
    block = total.size // g
    return [total[r * block:(r + 1) * block].copy() for r in range(g)]


def _exp_alltoall(arrs, g, root, fold):
    block = arrs[0].size // g
    return [_concat([arrs[s][r * block:(r + 1) * block] for s in range(g)]) for r in range(g)]


def _exp_broadcast(arrs, g, root, fold):
    return [arrs[root].copy() for _ in range(g)]


def _exp_reduce(arrs, g, root, fold):
    total = fold(arrs)
    return [total if r == root else None for r in range(g)]


def _exp_gather(arrs, g, root, fold):
    whole = _concat(arrs)
    return [whole if r == root else None for r in range(g)]


def _exp_scatter(arrs, g, root, fold):
    block = arrs[root].size // g
    return [arrs[root][r * block:(r + 1) * block].copy() for r in range(g)]


_ALL = [
    CollectiveKind("allreduce", api_name="all_reduce", reducing=True,
                   busbw=lambda n: 2 * (n - 1) / n,
                   postcondition=_post_allreduce, expected=_exp_allreduce),
    CollectiveKind("allgather", api_name="all_gather", layout="gathered",
                   traits=_t("blocks", "joins", "per_rank_chunks"), busbw=_ring_busbw,
                   postcondition=_post_allgather, expected=_exp_allgather),
    CollectiveKind("reduce_scatter", spellings=("reducescatter",), reducing=True,
                   layout="scattered", traits=_t("blocks", "splits", "per_rank_chunks"),
                   busbw=_ring_busbw, postcondition=_post_reduce_scatter,
                   expected=_exp_reduce_scatter),
    CollectiveKind("alltoall", api_name="all_to_all",
                   traits=_t("blocks", "splits", "joins", "per_rank_chunks"), busbw=_ring_busbw,
                   postcondition=_post_alltoall, expected=_exp_alltoall),
    CollectiveKind("broadcast", rooted=True, postcondition=_post_broadcast,
                   expected=_exp_broadcast),
    CollectiveKind("reduce", rooted=True, reducing=True, traits=_t("root_only"),
                   postcondition=_post_reduce, expected=_exp_reduce),
    CollectiveKind("gather", rooted=True, layout="declared",
                   traits=_t("blocks", "joins", "root_only", "since_executor"), busbw=_ring_busbw,
                   postcondition=_post_gather, expected=_exp_gather),
    CollectiveKind("scatter", rooted=True, layout="declared",
                   traits=_t("blocks", "splits", "since_executor"), busbw=_ring_busbw,
                   postcondition=_post_scatter,
                   expected=_exp_scatter),
    # a program's own collective: its layout and postcondition come from the program
    CollectiveKind("custom", layout="declared"),
]

#: name -> entry, in the IR's order (call descriptors number them in this order)
KINDS: dict[str, CollectiveKind] = {k.name: k for k in _ALL}
#: every accepted spelling -> name
SPELLINGS: dict[str, str] = {**{k.name: k.name for k in _ALL},
                             **{s: k.name for k in _ALL for s in k.spellings}}
NAMES: tuple[str, ...] = tuple(KINDS)
ROOTED = frozenset(k.name for k in _ALL if k.rooted)
REDUCING = frozenset(k.name for k in _ALL if k.reducing)
#: the collectives with a built-in postcondition and NumPy result (all but ``custom``)
STANDARD = frozenset(k.name for k in _ALL if k.postcondition is not None)


def having(trait: str) -> frozenset[str]:
    """The collectives with ``trait`` (:data:`TRAITS`)."""
    return frozenset(k.name for k in _ALL if trait in k.traits)


PER_RANK_BLOCKS = having("blocks")


def kind(spelling: str) -> CollectiveKind:
    """The entry for ``spelling`` (a name or an accepted spelling); KeyError if none."""
    return KINDS[SPELLINGS[spelling]]


def fold_with(ufunc) -> Callable:
    """``fold(arrays)``: ``ufunc`` applied left to right over copies of ``arrays``."""
    return lambda parts: _fold(lambda a, b: ufunc(a, b), parts[1:], parts[0].copy())
