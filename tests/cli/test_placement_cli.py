"""``simulate --placement``: the job's machines over a leaf/spine cluster's groups."""

import json

import pytest

from msccl_py.cli import main

CLUSTER = ("cluster c {{ machine dgx-h100 nodes 8 fabric rail group 2 spines 2 "
           "oversubscription {os} placement packed }}")


def _busbw(capsys, path, *extra):
    assert main(["simulate", "nccl", "--topology", str(path), "--sizes", "1GiB", "--json",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)[0]["busbw_GBps"]


def test_placement_moves_nccl_only_on_an_oversubscribed_fabric(tmp_path, capsys):
    slow, full = tmp_path / "slow.topo", tmp_path / "full.topo"
    slow.write_text(CLUSTER.format(os=4))
    full.write_text(CLUSTER.format(os=1))
    packed, robin = (_busbw(capsys, slow, "--placement", p) for p in ("packed", "round-robin"))
    assert robin < packed
    assert _busbw(capsys, full, "--placement", "round-robin") == pytest.approx(
        _busbw(capsys, full))
    # the table says what holds NCCL back
    assert main(["simulate", "nccl", "--topology", str(slow), "--sizes", "1GiB",
                 "--placement", "round-robin"]) == 0
    assert "leaf uplinks hold" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--placement", "sorted"], "unknown placement 'sorted'"),
    (["--placement", "packed:3"], "only scattered takes a seed"),
])
def test_bad_placements_are_one_line(tmp_path, capsys, extra, message):
    path = tmp_path / "c.topo"
    path.write_text(CLUSTER.format(os=2))
    assert main(["simulate", "nccl", "--topology", str(path), "--sizes", "1GiB", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_machine_without_a_fabric_refuses_a_placement(capsys):
    assert main(["simulate", "nccl", "--topology", "dgx-h100", "--placement", "packed"]) == 2
    assert "no leaf/spine fabric" in capsys.readouterr().err
