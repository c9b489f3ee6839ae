"""Every machine file loads and carries the datasheet numbers its header states."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import amd4, amd8, available, dgx1, dgx_a100, load, resolve, search_path
from msccl_py.topologies.analysis import bisection, gpu_bandwidth

REPO = Path(__file__).resolve().parents[2]
FILES = sorted((REPO / "topologies").glob("*.topo"))

# msccl-tools' dgx1() links[dst][src]
MSCCL_DGX1 = [[0, 2, 1, 1, 2, 0, 0, 0], [2, 0, 1, 2, 0, 1, 0, 0], [1, 1, 0, 2, 0, 0, 2, 0],
              [1, 2, 2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2, 1, 1], [0, 1, 0, 0, 2, 0, 1, 2],
              [0, 0, 2, 0, 1, 1, 0, 2], [0, 0, 0, 1, 1, 2, 2, 0]]
MSCCL_AMD8 = [[0, 5, 6, 6, 5, 6, 5, 5], [5, 0, 5, 5, 6, 5, 6, 6], [6, 5, 0, 6, 5, 6, 5, 5],
              [6, 5, 6, 0, 5, 6, 5, 5], [5, 6, 5, 5, 0, 5, 6, 6], [6, 5, 6, 6, 5, 0, 5, 5],
              [5, 6, 5, 5, 6, 5, 0, 6], [5, 6, 5, 5, 6, 5, 6, 0]]


def test_all_required_machines_exist():
    names = {f.stem for f in FILES}
    assert {"dgx1", "dgx2", "dgx-a100", "dgx-h100", "hgx-h200", "ndv2", "ndv4", "ndv5",
            "mi250", "mi300x", "amd4", "amd8"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_loads_and_cites_sources(path):
    topo = load(path)
    assert topo.num_nodes() >= 4
    head = path.read_text().split("machine", 1)[0]
    assert "msccl-tools" in head or "Sources" in head


def _uniform(topo, value):
    bw = topo.bandwidth_matrix()
    off = ~np.eye(topo.num_nodes(), dtype=bool)
    np.testing.assert_array_equal(bw[off], value)
    assert np.all(np.diag(bw) == 0)


def test_dgx1_matches_msccl_and_nvlink2_numbers():
    t = dgx1()
    assert t.links == MSCCL_DGX1
    bw = t.bandwidth_matrix()
    assert bw[0, 1] == 50.0 and bw[0, 2] == 25.0 and bw[0, 5] == 0.0   # NVLink 2.0: 25 GB/s/link
    np.testing.assert_array_equal(bw.sum(axis=1), 150.0)             # 6 links per V100
    assert (bw > 0).sum() == 32                                        # 16 links, both ways
    assert t.diameter() == 2
    assert [t.graph.nodes[n]["bw"] for n in t.devices("nic")] == [12.5] * 4   # 100 Gb/s EDR


def test_dgx2_nvswitch_numbers():
    t = load("dgx2")
    _uniform(t, 150.0)                                  # 6 x 25 GB/s through NVSwitch
    assert bisection(t).bandwidth == 1200.0             # datasheet 2.4 TB/s both ways
    assert len(t.devices("nic")) == 8


def test_dgx_a100_numbers():
    t = dgx_a100()
    assert t.link(0, 7) == 12                           # msccl-tools: 12 NVLinks
    _uniform(t, 300.0)                                  # 12 x 25 GB/s per direction
    local, net = gpu_bandwidth(t)
    np.testing.assert_array_equal(local, 300.0)        # port-limited, not 7 x 300
    np.testing.assert_array_equal(net, 25.0)           # 200 Gb/s HDR per GPU


@pytest.mark.parametrize("name", ["dgx-h100", "hgx-h200", "ndv5"])
def test_h100_class_numbers(name):
    t = load(name)
    _uniform(t, 450.0)                                  # 18 NVLink4 x 25 GB/s
    assert t.link(2, 5) == 18
    _, net = gpu_bandwidth(t)
    np.testing.assert_array_equal(net, 50.0)            # 400 Gb/s per GPU


def test_ndv2_shares_one_nic():
    t = load("ndv2")
    assert t.links == MSCCL_DGX1                        # inherits the DGX-1 links
    (nic,) = t.devices("nic")
    assert t.graph.nodes[nic]["gpus"] == list(range(8))
    _, net = gpu_bandwidth(t)
    np.testing.assert_allclose(net, 12.5 / 8)


def test_ndv4_numbers():
    t = load("ndv4")
    _uniform(t, 300.0)
    assert len(t.devices("nic")) == 8 and t.model == "A100-SXM4-40GB"


def test_mi250_xgmi_numbers():
    t = load("mi250")
    bw = t.bandwidth_matrix()
    for pair in [(0, 1), (2, 3), (4, 5), (6, 7)]:
        assert bw[pair] == 200.0                       # 4 x 50 GB/s inside an OAM
    assert bw[0, 6] == 100.0 and bw[2, 4] == 100.0     # dual links
    for pair in [(0, 2), (1, 3), (1, 5), (3, 7), (4, 6), (5, 7)]:
        assert bw[pair] == 50.0
    assert (bw > 0).sum() == 24
    np.testing.assert_array_equal(bw, bw.T)


def test_mi300x_numbers():
    t = load("mi300x")
    _uniform(t, 64.0)                                  # 64 GB/s per link per direction
    local, _ = gpu_bandwidth(t)
    np.testing.assert_array_equal(local, 7 * 64.0)     # 896 GB/s bidirectional


def test_amd_matrices_are_msccl_tools():
    assert amd4().links == [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]
    t = amd8()
    assert t.links == MSCCL_AMD8
    assert t.link(0, 2) == 6 and t.link(0, 1) == 5
    assert t.bandwidth_unit == "links"


@pytest.mark.parametrize("name, per_node, nic_bw", [("dgx-h100", 8, 50.0), ("dgx1", 8, 12.5),
                                                    ("ndv2", 8, 12.5), ("dgx2", 16, 12.5)])
def test_clusters_have_ranks_and_internode_links(name, per_node, nic_bw):
    t = load(name, nodes=3)
    n = 3 * per_node
    assert t.num_nodes() == n and t.num_machines == 3
    node = np.arange(n) // per_node
    remote = node[:, None] != node[None, :]
    bw = t.bandwidth_matrix()
    np.testing.assert_array_equal(bw[remote], nic_bw)
    local = load(name).bandwidth_matrix()
    for k in range(3):
        block = slice(k * per_node, (k + 1) * per_node)
        np.testing.assert_array_equal(bw[block, block], local)
    nic_names = [c[3] for c in t.switches if c[3].startswith("ib") and c[3].endswith("_out")]
    assert len(nic_names) == len(t.devices("nic")) == 3 * len(load(name).devices("nic"))
    route = t.route(0, n - 1)
    assert route[0] == 0 and route[-1] == n - 1 and "network" in route


def test_cluster_bisection_is_nic_limited():
    assert bisection(load("dgx-h100", nodes=2)).bandwidth == 8 * 50.0
    assert bisection(load("ndv2", nodes=2)).bandwidth == 12.5


def test_board_without_nics_cannot_be_clustered():
    with pytest.raises(TopologyError, match="declares no NICs"):
        load("mi250", nodes=2)


def test_resolve_accepts_topology_name_and_path():
    t = dgx1()
    assert resolve(t) is t
    assert resolve("dgx1").links == MSCCL_DGX1
    assert resolve(REPO / "topologies" / "dgx1.topo").name == "dgx1"
    with pytest.raises(TopologyError, match="expected a Topology"):
        resolve(42)


def test_unknown_name_lists_known():
    with pytest.raises(TopologyError, match="unknown topology 'dgx9'.*dgx-h100"):
        load("dgx9")
    with pytest.raises(TopologyError, match="; did you mean `dgx-h100`"):
        load("dgx-h10")


def test_search_path_env_overrides(tmp_path, monkeypatch):
    (tmp_path / "dgx1.topo").write_text("machine dgx1 { gpus 2 linktype l 1 GB/s link 0 -> 1 l }")
    monkeypatch.setenv("MSCCL_PY_TOPOLOGY_PATH", str(tmp_path))
    assert search_path()[0] == tmp_path
    assert load("dgx1").num_nodes() == 2
    assert available()["dgx1"] == tmp_path / "dgx1.topo"


def test_package_copy_points_at_the_same_files():
    shipped = REPO / "msccl_py" / "topologies" / "files"
    assert sorted(p.name for p in shipped.glob("*.topo")) == [p.name for p in FILES]


def test_importing_does_not_import_lark():
    code = ("import sys, msccl_py.topologies\n"
            "from msccl_py.topologies import *\n"
            "t = ring(4); t.links; t.diameter()\n"
            "assert 'lark' not in sys.modules, 'lark imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr


def test_missing_lark_is_a_clear_error(monkeypatch):
    import builtins

    from msccl_py.topologies import larkutil, library
    real = builtins.__import__

    def no_lark(name, *args, **kwargs):
        if name == "lark" or name.startswith("lark."):
            raise ImportError("no lark")
        return real(name, *args, **kwargs)

    larkutil.parser.cache_clear()
    library.clear_cache()
    monkeypatch.setattr(builtins, "__import__", no_lark)
    try:
        with pytest.raises(TopologyError, match="needs lark, which is not installed"):
            load("dgx1")
    finally:
        monkeypatch.undo()
        larkutil.parser.cache_clear()


# ------------------------------------------------------------- machines people rent
# name: (model substring, NICs, Gb/s per NIC, GPUs per NIC, network kind)
CLOUD = {
    "p4d": ("A100-SXM4-40GB", 4, 100, 2, "efa"),
    "p4de": ("A100-SXM4-80GB", 4, 100, 2, "efa"),
    "p5": ("H100", 8, 400, 1, "efa"),
    "a3-mega": ("H100", 8, 200, 1, "tcpxo"),
    "bm-gpu4": ("A100-SXM4-40GB", 8, 200, 1, "roce"),
    "bm-gpu-h100": ("H100", 8, 400, 1, "roce"),
    "nd-h200-v5": ("H200", 8, 400, 1, "ib"),
    "nd-mi300x-v5": ("MI300X", 8, 400, 1, "ib"),
    "nd-h100-v5": ("H100", 8, 400, 1, "ib"),
    "nd-a100-v4": ("A100-SXM4-40GB", 8, 200, 1, "ib"),
    "dgx-a100": ("A100", 8, 200, 1, "ib"),
    "dgx-h100": ("H100", 8, 400, 1, "ib"),
    "hgx-h200": ("H200", 8, 400, 1, "roce"),
    "mi300x": ("MI300X", 8, 400, 1, "ib"),
    "dgx1": ("V100", 4, 100, 2, "ib"),
}


@pytest.mark.parametrize("name", sorted(CLOUD))
def test_rented_machines_have_their_nics_and_network_kind(name):
    model, count, gbps, per_nic, kind = CLOUD[name]
    t = load(name)
    assert model in t.model and t.network_kind == kind
    nics = [t.graph.nodes[n] for n in t.devices("nic")]
    assert len(nics) == count
    assert {n["bw"] for n in nics} == {gbps / 8}
    assert {len(n["gpus"]) for n in nics} == {per_nic}
    covered = sorted(g for n in nics for g in n["gpus"])
    assert covered == list(range(8))                   # every GPU reaches the network once
    _, net = gpu_bandwidth(t)
    np.testing.assert_allclose(net, gbps / 8 / per_nic)


def test_p4de_two_gpus_share_each_efa_nic_across_nodes():
    t = load("p4de", nodes=2)
    _, net = gpu_bandwidth(t)
    np.testing.assert_allclose(net, 6.25)              # 100 Gb/s over two GPUs
    assert bisection(t).bandwidth == 4 * 12.5          # four NICs per node, not eight
    efa0 = t.graph.nodes["efa0@0"]
    assert efa0["gpus"] == [0, 1]
    out = [c for c in t.switches if c[3] == "efa0@0_out"]
    assert len(out) == 1 and sorted(out[0][0]) == [0, 1] and out[0][2] * t.unit_bw == 12.5
    assert t.route(0, 8)[1] == "efa0@0" and t.route(1, 9)[1] == "efa0@0"


def test_azure_aliases_are_the_same_machines():
    for alias, base in [("nd-h100-v5", "ndv5"), ("nd-a100-v4", "ndv4")]:
        a, b = load(alias), load(base)
        np.testing.assert_array_equal(a.bandwidth_matrix(), b.bandwidth_matrix())
        assert a.model == b.model and a.network_kind == b.network_kind
        assert [a.graph.nodes[n]["bw"] for n in a.devices("nic")] == \
            [b.graph.nodes[n]["bw"] for n in b.devices("nic")]
