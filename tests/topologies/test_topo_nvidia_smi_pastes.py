"""Real `nvidia-smi topo -m` pastes: escape-code remnants, captions and prompts around them."""

from pathlib import Path

import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import read_nvidia_smi

DATA = Path(__file__).parent / "data"
B300 = (DATA / "sglang-b300-8gpu-escape-remnants.txt").read_text()

#: how pastes spell the terminal's underline/reset codes (the B300 paste lost the ESC byte)
SPELLINGS = {
    "no-esc": lambda code: code,
    "esc-byte": lambda code: "\x1b" + code,
    "python-escape": lambda code: "\\x1b" + code,
    "octal-escape": lambda code: "\\033" + code,
    "caret": lambda code: "^[" + code,
    "esc-symbol": lambda code: "\u241b" + code,
}


def _respell(text: str, spell) -> str:
    return text.replace("[4m", spell("[4m")).replace("[0m", spell("[0m"))


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_b300_paste_reads_right_however_the_escape_codes_survived(spelling):
    t = read_nvidia_smi(_respell(B300, SPELLINGS[spelling]))
    assert t.num_nodes() == 8
    assert all(t.link(a, b) == 18 for a in range(8) for b in range(8) if a != b)
    assert t.graph.nodes["nvswitch"]["kind"] == "switch"   # 7 x NV18 > 18 links per GPU
    nics = {n: d["gpus"] for n, d in t.graph.nodes(data=True) if d.get("kind") == "nic"}
    assert nics["mlx5_10"] == [0] and nics["mlx5_17"] == [7]
    assert nics["mlx5_bond_0"] == [4, 5, 6, 7]              # NODE to the second socket's GPUs
    assert t.graph.nodes[4]["cpu_affinity"] == "64-127,192-255"
    assert t.graph.nodes[7]["numa_affinity"] == "1" and t.graph.nodes[7]["gpu_numa_id"] == "N/A"


def test_single_gpu_paste_after_a_shell_prompt():
    t = read_nvidia_smi((DATA / "hami-tesla-p4-1gpu-prompt.txt").read_text())
    assert t.num_nodes() == 1
    assert t.graph.nodes[0]["cpu_affinity"] == "0-7"
    assert t.graph.nodes[0]["numa_affinity"] == "N/A"


def test_errors_keep_the_line_numbers_of_the_paste():
    lines = B300.splitlines(keepends=True)
    assert lines[5].startswith("GPU2")
    lines[5] = lines[5].replace("NV18", "NVX", 1)
    with pytest.raises(TopologyError) as info:
        read_nvidia_smi("".join(lines), file="paste.txt")
    assert str(info.value).startswith("paste.txt:6:")


def test_text_inside_the_legend_is_still_an_error():
    text = B300.replace("  PIX  = ", "  oops\n  PIX  = ")
    with pytest.raises(TopologyError, match="oops|unexpected"):
        read_nvidia_smi(text)
