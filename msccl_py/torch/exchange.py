"""Calls the msccl backend composes from the communicator's: uneven all-to-all, bitwise
reductions through one all_gather, sparse all_reduce, and float sums in gloo's order.

Each function takes the group's :class:`~msccl_py.runtime.communicator.Communicator`
(``comm``) and runs on every rank of the group, as a collective does.
"""

from __future__ import annotations

import numpy as np
import torch

from msccl_py.torch import ops
from msccl_py.torch.errors import RefusedError, SizesError
from msccl_py.torch.tensors import host_view


def gathered_reduce(comm, t: torch.Tensor, op: str) -> torch.Tensor:
    """Every rank's ``t`` reduced with a bitwise ``op``, flat (one all_gather)."""
    flat = t.detach().reshape(-1).cpu().contiguous()
    got = comm.all_gather(host_view(flat))
    rows = torch.frombuffer(got, dtype=t.dtype).view(comm.world_size, -1) if got.size else \
        torch.empty((comm.world_size, 0), dtype=t.dtype)
    return ops.reduce_rows(rows, op).to(t.device)


def sparse_all_reduce(comm, tensors, opts) -> list:
    """SUM of sparse COO tensors, as gloo: every rank's indices and values are gathered
    and added; the result replaces each tensor's contents."""
    op, _ = ops.op_of(opts)
    if op != "sum":
        raise RefusedError(f"sparse all_reduce: only SUM is supported, not {op.upper()}")
    for t in tensors:
        s = t.detach().coalesce()
        idx, val = s.indices().contiguous(), s.values().contiguous()
        counts = comm.all_gather(np.array([idx.shape[1]], dtype=np.int64))
        top = int(counts.max())
        pi = torch.zeros((idx.shape[0], top), dtype=torch.int64)
        pi[:, :idx.shape[1]] = idx
        pv = torch.zeros((top, *val.shape[1:]), dtype=val.dtype)
        pv[:val.shape[0]] = val
        gi = torch.frombuffer(comm.all_gather(host_view(pi.reshape(-1))),
                              dtype=torch.int64).view(comm.world_size, idx.shape[0], top)
        gv = torch.frombuffer(comm.all_gather(host_view(pv.reshape(-1))),
                              dtype=val.dtype).view(comm.world_size, top, *val.shape[1:])
        parts = [(gi[r, :, :int(counts[r])], gv[r, :int(counts[r])])
                 for r in range(comm.world_size)]
        total = torch.sparse_coo_tensor(torch.cat([p[0] for p in parts], 1),
                                        torch.cat([p[1] for p in parts]), t.shape).coalesce()
        with torch.no_grad():
            t.copy_(total)
    return tensors


def all_to_all_v(comm, x: np.ndarray, out: np.ndarray, in_splits: list[int],
                 out_splits: list[int], t_in, t_out) -> None:
    """Uneven blocks: every rank's splits are exchanged (one small all_gather), checked
    against each other, and the blocks padded to the largest. Splits that are wrong
    on one rank make every rank raise (after the exchange), so none waits for it."""
    n, me = comm.world_size, comm.rank
    (row_in, rows_in), (row_out, rows_out) = rows_of(t_in, x.size), rows_of(t_out, out.size)
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
    table = comm.all_gather(mine).reshape(n, 2 * n + 1)
    if problem is not None:
        raise SizesError(f"all_to_all on rank {me}: {problem}")
    bad = [q for q in range(n) if table[q, 0]]
    if bad:
        raise SizesError(f"all_to_all: rank(s) {bad} passed split sizes that do not describe "
                        f"their tensors")
    sends, recvs = table[:, 1:n + 1], table[:, n + 1:]
    for q in range(n):
        if recvs[q].tolist() != sends[:, q].tolist():
            raise SizesError(f"all_to_all on rank {q}: output split sizes "
                            f"{recvs[q].tolist()} but the ranks send "
                            f"{sends[:, q].tolist()} rows")
    table = sends
    m = int(table.max()) * row_in
    padded = np.zeros(n * m, dtype=x.dtype)
    at = 0
    for j, k in enumerate(ins):
        padded[j * m:j * m + k * row_in] = x[at:at + k * row_in]
        at += k * row_in
    got = comm.all_to_all(padded) if m else padded
    at = 0
    for j, k in enumerate(outs):
        out[at:at + k * row_out] = got[j * m:j * m + k * row_out]
        at += k * row_out


def ring_order_reduce_scatter(comm, src: torch.Tensor, out: torch.Tensor, op: str) -> None:
    """Float SUM/AVG reduce_scatter that adds in gloo's order, so results are gloo's bit
    for bit (FSDP's gradients, and so the trained parameters, then equal gloo's even
    where rounding decides them, as it does for Adam on a gradient that is zero up to
    rounding). One all_to_all brings every rank's block ``me`` here, where
    :func:`_gloo_ring_sum` adds the blocks; the bytes moved are a ring's."""
    n, me = comm.world_size, comm.rank
    flat = src.detach().reshape(-1).contiguous()
    rows = torch.from_numpy(comm.all_to_all(host_view(flat))).view(n, -1)
    acc = gloo_ring_sum(rows, me * rows.shape[1], flat.numel(), n)
    if op == "avg":
        acc /= n
    with torch.no_grad():
        out.copy_(acc.view(out.shape))

def gloo_ring_sum(rows: torch.Tensor, start: int, total: int, n: int) -> torch.Tensor:
    """The sum over ranks of ``rows`` (row r: rank r's elements ``start ..``) in the order
    of gloo's ring allreduce, which ``ProcessGroupGloo`` also reduce-scatters with: the
    buffer splits into ``n`` chunks of whole segments, and chunk c adds
    ``((x[c-1] + x[c-2]) + ...) + x[c]``. Segments: at least ``2n``, a multiple of ``n``,
    at most 1 MiB each (gloo/allreduce.cc ``ring()`` and ``kMaxSegmentSize``,
    facebookincubator/gloo); float addition commutes, so only this grouping matters.
    Checked bit for bit against torch 2.13's gloo (3 and 4 ranks, 37 to 3M elements)."""
    size = rows.element_size()
    total_bytes = total * size
    max_seg = size * max(1, (1 << 20) // size)
    segments = -(-max(-(-total_bytes // max_seg), 2 * n) // n) * n
    seg_el = -(-(-(-total_bytes // segments)) // size)
    chunk = seg_el * (segments // n)          # elements per chunk
    width = rows.shape[1]
    acc = torch.empty(width, dtype=rows.dtype)
    at = 0
    while at < width:
        c = min((start + at) // chunk, n - 1)
        end = min(width, (c + 1) * chunk - start)
        piece = acc[at:end]
        piece.copy_(rows[(c - 1) % n, at:end])
        for i in range(2, n + 1):
            piece += rows[(c - i) % n, at:end]
        at = end
    return acc


def rows_of(t, size: int) -> tuple[int, int]:
    """Elements per row of dim 0 and the number of rows, which split sizes count (a list
    of tensors, or a 0-dim tensor: rows of one element)."""
    if t is None or t.dim() == 0:
        return 1, size
    n = t.shape[0]
    return (size // n if n else 1), n


