"""GPU models: datasheet link speeds for nvidia-smi output, and the machine they lend figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from msccl_py.errors import TopologyError
from msccl_py.simulate import machine_model
from msccl_py.topologies import load
from msccl_py.topologies.gpus import MODELS, gpu_model, read_nvidia_smi_model, require_gpu_model
from msccl_py.topologies.rings import ring_search

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("text,name", [("NVIDIA H100 80GB HBM3", "H100"), ("H100-SXM5", "H100"),
                                       ("A100-SXM4-80GB", "A100"), ("Tesla V100-SXM2-16GB", "V100"),
                                       ("NVIDIA H20", "H20"), ("H200-SXM", "H200"),
                                       ("NVIDIA L40S", "L40S"), ("NVIDIA GeForce RTX 5090", "RTX 5090"),
                                       ("RTX5090", "RTX 5090"), ("h100", "H100"), ("L40", "L40"),
                                       ("RTX-A6000", "RTX A6000")])
def test_model_names_match_as_whole_words(text, name):
    assert gpu_model(text).name == name


@pytest.mark.parametrize("text", ["NVIDIA A10", "H1000", "AMD Instinct MI300X", "", None,
                                  "L400", "H2000"])
def test_unknown_models_match_nothing(text):
    assert gpu_model(text) is None


def test_every_model_cites_its_datasheet_and_machine_files_exist():
    for m in MODELS:
        assert "datasheet" in m.source or "specifications" in m.source
        assert m.pcie_GBps in (16.0, 32.0, 64.0)
        if m.machine:
            assert gpu_model(load(m.machine).model) is m


def test_nvidia_smi_h100_reads_like_the_dgx_h100_file():
    topo = read_nvidia_smi_model((DATA / "sglang-b300-8gpu-escape-remnants.txt").read_text()
                                 .replace("B300", "H100"), "H100")
    assert topo.bandwidth(0, 1) == 450.0      # 18 NVLinks x 25 GB/s, through one switch
    m, ref = machine_model(topo), machine_model("dgx-h100")
    assert m.threadblock_bw == ref.threadblock_bw
    assert m.protocol("LL").threadblock_bw == ref.protocol("LL").threadblock_bw
    assert len(ring_search(topo).rings) == 12


def test_pcie_pairs_share_each_gpus_x16_port():
    topo = read_nvidia_smi_model((DATA / "pcie-l40s-4gpu.txt").read_text(), "L40S")
    g = topo.graph
    assert all(g.edges[a, b]["via"] == "pcie" for a in range(4) for b in range(4) if a != b)
    assert g.nodes["pcie"]["port_bw"] == 32.0


def test_dgx1_nvlinks_and_pcie_keep_nccls_six_rings():
    topo = read_nvidia_smi_model((DATA / "dgx1-v100.txt").read_text(), "V100")
    found = ring_search(topo)
    assert (len(found.rings), found.speed) == (6, 20.0)
    assert all(not topo.graph.edges[a, b].get("via")
               for ring in found.rings for a, b in zip(ring, ring[1:] + ring[:1]))


def test_wrong_or_unknown_models_are_refused():
    with pytest.raises(TopologyError, match="unknown GPU model 'Z9'.*known: P100, V100"):
        require_gpu_model("Z9")
    with pytest.raises(TopologyError, match="shows NVLinks, but a L40S has none"):
        read_nvidia_smi_model((DATA / "dgx1-v100.txt").read_text(), "L40S")
