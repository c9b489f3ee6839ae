"""Pictures: written, sized sensibly, and a clear error without matplotlib."""

import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import load, ring
from msccl_py.topologies.draw import MAX_MACHINES, draw, layout


def test_layout_per_node():
    t = load("dgx-h100", nodes=2)
    pos, machines, boxes = layout(t)
    assert machines == [0, 1]
    assert all(boxes[0][1] > pos[r][1] for r in range(8, 16))          # node 1 below node 0
    assert sorted(pos[r][0] for r in range(8)) == [pos[r][0] for r in range(8)]
    assert "network" in pos and pos["network"][0] > max(b[2] for b in boxes.values())
    dgx1 = layout(load("dgx1"))[0]
    assert dgx1[0][1] == dgx1[1][1] and dgx1[2][1] == dgx1[3][1]      # the file's places


def test_large_clusters_draw_a_few_machines():
    t = load("dgx-a100", nodes=MAX_MACHINES + 4)
    pos, machines, _ = layout(t)
    assert len(machines) == MAX_MACHINES
    assert max(r for r in pos if isinstance(r, int)) == 8 * MAX_MACHINES - 1


@pytest.mark.parametrize("name, nodes", [("dgx1", 1), ("dgx-h100", 2), ("amd8", 1), ("mi250", 1)])
def test_png_is_written(tmp_path, name, nodes):
    pytest.importorskip("matplotlib")
    out = draw(load(name, nodes=nodes), tmp_path / f"{name}.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_missing_matplotlib_is_one_line(no_matplotlib, tmp_path):
    with pytest.raises(TopologyError, match=r"^drawing needs matplotlib.*: pip install -e "
                                            r"\"\.\[plot\]\"$"):
        draw(ring(4), tmp_path / "r.png")


def test_unwritable_target(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(TopologyError, match="cannot write picture"):
        draw(ring(3), tmp_path / "missing-dir" / "r.png")
