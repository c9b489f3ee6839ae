"""Network kinds a machine's NICs can be, and the latency each one adds per hop.

A topology file says ``network kind efa`` (in a machine) or ``network BW kind
roce`` (in a cluster); :func:`default_latency` turns the kind into the
cluster's network latency, which the performance model charges for every
step that crosses the network (``Machine.network_latency_us``): the kind's
hardware figure plus its plugin's plus its measured crossing cost (2.7 µs on
IB and RoCE, 77.7 on EFA, 46.7 on TCPXO). An explicit ``latency T`` in the
file wins over the kind's default. ``simulate nccl`` splits it again: the
crossing cost is added per crossing, NCCL's hardware figures scale with the
part above the plugin's, and the plugin's is added as tuning.cc adds it. A
file that states a step below 2.7 plus the plugin's figure (p5.topo: 2.7 + 20,
aws-ofi-nccl's tuner's measured P5 step) has NCCL choose with the plugin's
report and the time pay its own ``T - 2.7`` in its place.

Each kind carries three figures, each from its source:

* ``latency_us``, the hardware per-step figure NCCL's model charges for a
  network step, scaled from NCCL's own 2.7 µs (``hwLatencies[NCCL_HW_NET]``
  for Ring/LL in ``src/graph/tuning.cc``, NVIDIA/nccl commit 5067397c,
  unchanged since NCCL 2.12). IB, RoCE (NCCL's IB transport drives both) and
  EFA and TCPXO (network plugins, whose per-step cost NCCL prices through the
  same table plus the latency the plugin reports, below) all keep 2.7 µs.
* ``plugin_latency_us``, what the network plugin reports to NCCL as its
  latency (``ncclNetProperties_t.latency``). NCCL 2.30 adds it to every
  network step of its model, twice for Simple ("Also add the flush extra
  latency": ``interLat += graphs[a]->latencyInter`` in tuning.cc, taken from
  the NIC the search put the channel on, search.cc). NCCL's own IB/RoCE
  transport reports 0. AWS's OFI plugin reports 75 µs on p4d, p4de, p5 and
  p5e (``.latency = 75.0`` in the platform table of aws/aws-ofi-nccl commit
  2daf7d30, ``src/platform-aws.cpp``; 35 on p5en and later). Google's
  GPUDirect-TCPXO plugin reports 0 (google/nccl-plugin-gpudirect-tcpxo
  commit 04815d1b, ``tcpdirect_plugin/fastrak_offload/nccl_shim.cc``:
  ``props.latency = 0``).
* ``protocols``, the NCCL protocols the network's standard setup enables:
  all three on IB, RoCE and EFA (the OFI plugin forces ``NCCL_PROTO=simple``
  only where EFA gives no in-order 128-byte delivery or no GPUDirect,
  neither of which holds on p4d and later); Simple and LL128 on TCPXO, whose
  published NCCL environment sets ``NCCL_PROTO=Simple,LL128``
  (google/nccl-plugin-gpudirect-tcpxo, ``tcpxo_scripts/nccl-env-profile.sh``).

The aws-ofi-nccl tuner's own ``net_lat`` (20 µs on P5/P5e, "2 nodes, 8B RDMA
w/imm lat", ``include/tuner/nccl_ofi_tuner_model.h``) is the raw one-way
figure its own tuner uses on P5 and later; it is not what NCCL adds per step,
and p4d/p4de run NCCL's model (the tuner supports only p5 and later,
``include/tuner/nccl_ofi_tuner_process_config.h``).

* ``step_us``, what one network crossing costs the time on top of NCCL's
  figures where the plugin reports nothing of it (so NCCL's choice does not
  see it). TCPXO: 44 µs, measured: the two-node a3-mega all_gather of
  MG-Cafe/TCPXO-Enabled-A3-Mega-H100-Benchmarks commit 326d6034,
  ``docs/benchmark-report.md`` ("Test 3", NCCL 2.28.7, FasTrak plugin
  v1.0.15; a table, not a log) takes 110, 141.7, 145.4 and 156.1 µs at 64 KiB,
  512 KiB, 1 MiB and 4 MiB, where NCCL's ring LL128 (two network crossings
  on its critical path) takes 48.4, 51.0, 53.8 and 70.2: 31, 45, 46 and 43 µs
  per crossing, median 44. The receive path of GPUDirect-TCPXO runs through
  its Receive Data Path Manager (the RxDM sidecar of Google's GKE manifests),
  not the NIC alone. Checked on the two published a3-mega logs it was not
  taken from (tests/data/nccl_tests): the allreduce (NCCL 2.21.5, trees) and
  the all_gather (8 MiB - 8 GiB).

:func:`default_latency` adds ``step_us``, so the event engine charges it to
every step of a custom algorithm that crosses the network.
"""

from __future__ import annotations

from dataclasses import dataclass

from msccl_py.errors import TopologyError


@dataclass(frozen=True)
class NetworkKind:
    """One kind of NIC network: its name, NCCL's hardware per-step latency (µs), where
    the figures are from, the latency its NCCL network plugin reports (µs; NCCL adds
    it per network step), the protocols its standard NCCL setup enables and what a
    crossing measurably costs beyond all that (µs; NCCL's choice does not see it)."""

    name: str
    latency_us: float
    source: str
    plugin_latency_us: float = 0.0
    protocols: tuple[str, ...] = ("LL", "LL128", "Simple")
    step_us: float = 0.0


#: every kind a topology file may name
KINDS: dict[str, NetworkKind] = {k.name: k for k in (
    NetworkKind("ib", 2.7, "NCCL tuning.cc hwLatencies[NET] Ring/LL"),
    NetworkKind("roce", 2.7, "NCCL tuning.cc hwLatencies[NET] Ring/LL (same transport as IB)"),
    NetworkKind("efa", 2.7, "NCCL's NET figure; aws-ofi-nccl platform-aws.cpp reports 75 us",
                plugin_latency_us=75.0),
    NetworkKind("tcpxo", 2.7, "NCCL's NET figure; nccl_shim.cc reports 0; "
                "nccl-env-profile.sh sets NCCL_PROTO=Simple,LL128; 44 us per crossing "
                "measured (MG-Cafe a3-mega all_gather, NCCL 2.28.7)",
                protocols=("LL128", "Simple"), step_us=44.0),
)}


def kind(name: str) -> NetworkKind:
    """The :class:`NetworkKind` called ``name`` (case-insensitive), else a TopologyError.

    >>> kind("EFA").plugin_latency_us
    75.0
    """
    found = KINDS.get(name.lower())
    if found is None:
        raise TopologyError(f"unknown network kind '{name}'; expected one of "
                            f"{', '.join(KINDS)}")
    return found


def default_latency(name: str | None) -> float | None:
    """Latency (µs) one network step costs on network kind ``name``: NCCL's hardware
    figure plus what the kind's plugin reports (NCCL adds both to a ring's LL network
    step) plus its measured cost per crossing (``step_us``); None when no kind is given."""
    if name is None:
        return None
    k = kind(name)
    return k.latency_us + k.plugin_latency_us + k.step_us


def of_topology(topology: object) -> NetworkKind | None:
    """The network kind of a multi-node topology (None on one node or without a kind)."""
    name = getattr(topology, "network_kind", None)
    if (getattr(topology, "num_machines", 1) or 1) < 2 or name is None:
        return None
    return kind(name)
