"""`nvidia-smi topo -m` reader: real samples, the old format, and malformed outputs."""

from pathlib import Path

import networkx as nx
import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import dgx1, nvlink_only, read_nvidia_smi
from msccl_py.topologies import nvidia_smi as smi

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "nvidia-smi"


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_dgx1_sample_is_the_cube_mesh():
    t = nvlink_only(sample("dgx1-v100.txt"))
    assert t.name == "NVLinkOnly"
    assert t.links[0] == [0, 1, 1, 2, 2, 0, 0, 0]
    assert all(sum(row) == 6 for row in t.links)            # 6 NVLinks per V100
    # same machine as dgx1.topo up to GPU numbering, multiplicities included
    ours = nx.Graph([(s, d, {"n": dgx1().link(s, d)}) for s in range(8) for d in range(8)
                     if dgx1().link(s, d)])
    theirs = nx.Graph([(s, d, {"n": t.link(s, d)}) for s in range(8) for d in range(8)
                       if t.link(s, d)])
    assert nx.is_isomorphic(ours, theirs, edge_match=lambda a, b: a["n"] == b["n"])


def test_dgx1_sample_full_reader():
    t = read_nvidia_smi(sample("dgx1-v100.txt"), nvlink_bw=25.0, pcie_bw=16.0, nic_bw=12.5)
    assert t.bandwidth(0, 3) == 50.0 and t.bandwidth(0, 1) == 25.0
    assert t.bandwidth(0, 5) == 16.0 and t.graph.edges[0, 5]["path"] == "SYS"
    assert t.graph.nodes[0]["cpu_affinity"] == "0-11,24-35"
    assert t.graph.nodes[7]["cpu_affinity"] == "12-23,36-47"
    assert t.devices("nic") == ["mlx5_0"]
    assert t.graph.nodes["mlx5_0"]["gpus"] == [2, 3]          # the PIX GPUs
    assert t.graph.nodes["mlx5_0"]["bw"] == 12.5


def test_dgx_a100_sample_with_nics_and_numa():
    t = read_nvidia_smi(sample("dgx-a100-nics.txt"))
    assert t.num_nodes() == 8
    assert t.link(0, 7) == 12 and t.bandwidth(0, 7) == 300.0
    assert t.devices("switch") == ["nvswitch"]                # 12 x 7 links > 18: a switch
    assert t.graph.edges[0, 1]["via"] == "nvswitch"
    nics = t.devices("nic")
    assert nics == [f"mlx5_{i}" for i in range(10)]           # names from the NIC legend
    assert t.graph.nodes["mlx5_0"]["gpus"] == [0, 1]
    assert t.graph.nodes["mlx5_6"]["gpus"] == [6, 7]
    assert t.graph.nodes["mlx5_8"]["gpus"] == list(range(8))   # storage NIC: SYS to all
    node = t.graph.nodes[4]
    assert (node["cpu_affinity"], node["numa_affinity"], node["gpu_numa_id"]) == \
        ("112-127,240-255", "7", "N/A")


def test_pcie_only_box():
    t = read_nvidia_smi(sample("pcie-l40s-4gpu.txt"), pcie_bw=32.0)
    assert t.bandwidth_unit == "GB/s" and t.unit_bw == 32.0
    assert t.link(0, 3) == 1 and t.bandwidth(0, 3) == 32.0
    assert {d["path"] for *_, d in t.graph.edges(data=True)} == {"NODE"}
    assert nvlink_only(sample("pcie-l40s-4gpu.txt")).connected() is False


def test_tab_separated_with_empty_cell():
    t = read_nvidia_smi(sample("pcie-rtx5090-tabs.txt"))
    assert t.num_nodes() == 2 and t.graph.edges[0, 1]["path"] == "PHB"
    assert t.graph.nodes[1]["numa_affinity"] == "0" and t.graph.nodes[1]["gpu_numa_id"] == "N/A"


def test_old_format_with_ansi_header_and_soc():
    t = read_nvidia_smi(sample("old-ansi-4gpu.txt"))
    assert t.link(0, 1) == 4 and t.link(0, 3) == 0.64       # SOC pair over 16 GB/s PCIe
    assert t.graph.nodes["mlx5_0"]["gpus"] == [0, 1]


def test_rocm_smi_is_rejected_clearly():
    with pytest.raises(TopologyError, match=r"x.txt:1:1: this is rocm-smi output, not "
                                            r"`nvidia-smi topo -m`"):
        read_nvidia_smi(sample("rocm-smi-mi300.txt"), file="x.txt")


GOOD = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU1\tNV2\t X \t0-3\n"
MALFORMED = [
    (GOOD.replace("NV2\t0-3\nGPU1", "NV2\t0-3\nGPU7"), 3, 1, "row GPU7 where the header says GPU1"),
    (GOOD.replace("\tNV2\t0-3\nGPU1", "\tQQ\t0-3\nGPU1"), 2, 10, "unexpected 'QQ'"),
    (GOOD.replace("GPU0\t X \tNV2", "GPU0\tNV2\tNV2"), 2, 6, "must have X in its own column"),
    (GOOD.replace("GPU1\tNV2\t X \t0-3", "GPU1\tNV2"), 3, 1, "needs 2 connection cells"),
    (GOOD.replace("\t0-3\nGPU1", "\t0-3\t5\t6\nGPU1"), 2, 18, "more cells than the header"),
    (GOOD + "GPU2\tNV2\tNV2\t X\n", 4, 1, "no more rows"),
    ("GPU0 GPU1\n", 1, 10, "unexpected end of input"),
    (GOOD.replace("GPU1\tNV2\t X ", "GPU1\tNV2\tXX"), 3, 10, "unexpected 'XX'"),
    (GOOD + "\nLegend:\n\n  X = Self\n  oops\n", 8, 3, "unexpected"),
]


@pytest.mark.parametrize("text, line, column, message", MALFORMED,
                         ids=[m[3] for m in MALFORMED])
def test_malformed_outputs_give_one_line_with_position(text, line, column, message):
    with pytest.raises(TopologyError) as info:
        read_nvidia_smi(text, file="topo.txt")
    out = str(info.value)
    assert "\n" not in out
    assert out.startswith(f"topo.txt:{line}:{column}: "), out
    assert message in out


def test_nvlink_only_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(smi.shutil, "which", lambda name: None)
    with pytest.raises(TopologyError, match="nvidia-smi is not on PATH"):
        nvlink_only()


def test_nvlink_only_runs_the_command(monkeypatch):
    class Done:
        returncode, stdout, stderr = 0, GOOD, ""
    monkeypatch.setattr(smi.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(smi.subprocess, "run", lambda *a, **k: Done())
    assert nvlink_only().links == [[0, 2], [2, 0]]


CORPUS_FILES = sorted(CORPUS.glob("*.txt")) if CORPUS.is_dir() else []


@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpus/nvidia-smi not present")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus(path):
    text = path.read_text()
    if "ROCm" in text:
        with pytest.raises(TopologyError, match="rocm-smi"):
            read_nvidia_smi(text, file=str(path))
        return
    t = read_nvidia_smi(text, file=str(path))
    header = text.splitlines()[0].split()
    assert t.num_nodes() == sum(1 for h in header if h.startswith("GPU") and h[3:].isdigit())
    assert t.connected()


def test_single_gpu_with_nic():
    text = ("\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tSYS\t0-15\t0\t\tN/A\nNIC0\tSYS\t X \n\n"
            "NIC Legend:\n\n  NIC0: mlx5_0\n")
    t = read_nvidia_smi(text)
    assert t.num_nodes() == 1 and t.links == [[0]]
    assert t.graph.nodes["mlx5_0"]["gpus"] == [0]
    assert t.diameter() == 0
