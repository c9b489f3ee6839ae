"""Network kinds a machine's NICs can be, and the latency each one adds per hop.

A topology file says ``network kind efa`` (in a machine) or ``network BW kind
roce`` (in a cluster); :func:`default_latency` turns the kind into the
cluster's network latency, which the performance model charges for every
step that crosses the network (``Machine.network_latency_us``). An explicit
``latency T`` in the file wins over the kind's default.

The figures, per network step of a ring (the small-message, LL case):

* ``ib`` 2.7 µs: NCCL's own figure for any network (``hwLatencies[NCCL_HW_NET]``
  for Ring/LL in ``src/graph/tuning.cc``, NVIDIA/nccl commit 5067397c, unchanged
  since NCCL 2.12). NCCL's IB transport also drives RoCE, so
* ``roce`` uses the same 2.7 µs: NCCL applies the NET figure to both and
  publishes no separate RoCE one.
* ``efa`` 20 µs: the AWS OFI NCCL plugin's tuner replaces NCCL's figure on
  AWS with ``net_lat = 20.0`` µs for P5/P5e ("2 nodes, 8B RDMA w/imm lat"),
  18.0 for P5en (aws/aws-ofi-nccl commit 2daf7d30, ``src/tuner/nccl_ofi_model.cpp``
  and ``include/tuner/nccl_ofi_tuner_model.h``). No figure is published for
  p4d/p4de's first-generation EFA; they take the P5 one.
* ``tcpxo`` 2.7 µs: no published per-step latency for GCP's GPUDirect-TCPXO was
  found; NCCL charges its NET figure to any network plugin that brings no tuner,
  so this is what NCCL itself assumes. Published a3-mega runs floor far higher
  (tests/data/nccl_tests/a3mega_h100_2node_all_reduce_tcpxo.txt: 123 µs at 8 B
  on 16 GPUs), so calibrate a3-mega files from a log.
"""

from __future__ import annotations

from dataclasses import dataclass

from msccl_py.errors import TopologyError


@dataclass(frozen=True)
class NetworkKind:
    """One kind of NIC network: its name, default per-hop latency (µs) and where that is from."""

    name: str
    latency_us: float
    source: str


#: every kind a topology file may name
KINDS: dict[str, NetworkKind] = {k.name: k for k in (
    NetworkKind("ib", 2.7, "NCCL tuning.cc hwLatencies[NET] Ring/LL"),
    NetworkKind("roce", 2.7, "NCCL tuning.cc hwLatencies[NET] Ring/LL (same transport as IB)"),
    NetworkKind("efa", 20.0, "aws-ofi-nccl tuner net_lat for P5/P5e"),
    NetworkKind("tcpxo", 2.7, "no published figure; NCCL's NET default"),
)}


def kind(name: str) -> NetworkKind:
    """The :class:`NetworkKind` called ``name`` (case-insensitive), else a TopologyError.

    >>> kind("EFA").latency_us
    20.0
    """
    found = KINDS.get(name.lower())
    if found is None:
        raise TopologyError(f"unknown network kind '{name}'; expected one of "
                            f"{', '.join(KINDS)}")
    return found


def default_latency(name: str | None) -> float | None:
    """Per-hop latency (µs) of network kind ``name``; None when no kind is given."""
    return None if name is None else kind(name).latency_us
