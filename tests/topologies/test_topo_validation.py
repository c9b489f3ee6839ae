"""Machine files' input validation: non-UTF-8 bytes, zero and negative speeds are one located
error each (topofile.decode, _negative_speed, _zero_speed), through the CLI too."""

from __future__ import annotations

import pytest

from msccl_py.cli import main
from msccl_py.errors import TopologyError
from msccl_py.topologies import load
from msccl_py.topologies.topofile import decode, parse_text

BOX = "machine m {{\n gpus 2\n linktype nv {bw}\n link 0 <-> 1 nv\n}}\n"


def test_non_utf8_is_one_line_with_its_position(tmp_path, capsys):
    path = tmp_path / "latin.topo"
    path.write_bytes(BOX.format(bw="100 GB/s").encode() + "# café\n".encode("latin-1"))
    with pytest.raises(TopologyError) as err:
        load(str(path))
    assert str(err.value) == (f"{path}:6:6: not UTF-8 text: byte 0xe9 cannot be decoded "
                              f"(save the file as UTF-8)")
    assert main(["simulate", "allreduce_ring", "--topology", str(path)]) == 2
    out, errs = capsys.readouterr()
    assert out == "" and errs == f"error: {err.value}\n"
    assert decode("é".encode()) == "é"


@pytest.mark.parametrize("bw, col, says", [
    ("0 GB/s", 14, "bandwidth 0 GB/s is not above 0"),
    ("0.0 Gb/s", 14, "bandwidth 0.0 Gb/s is not above 0"),
    ("-5 GB/s", 14, "bandwidth -5 GB/s is negative"),
])
def test_zero_and_negative_speeds_are_refused(bw, col, says):
    with pytest.raises(TopologyError) as err:
        parse_text(BOX.format(bw=bw), "m.topo")
    assert str(err.value).startswith(f"m.topo:3:{col}: {says}")


def test_zero_switch_and_network_are_refused_where_they_are():
    text = BOX.format(bw="10 GB/s").replace("}", " switch s gpus 0-1 port 0 GB/s\n}")
    with pytest.raises(TopologyError, match=r"^m.topo:5:25: bandwidth 0 GB/s is not above 0"):
        parse_text(text, "m.topo")
    text = BOX.format(bw="10 GB/s") + "cluster c {\n machine m\n nodes 2\n network 0 Gb/s\n}\n"
    with pytest.raises(TopologyError, match=r"^m.topo:9:10: bandwidth 0 Gb/s is not above 0"):
        parse_text(text, "m.topo")


def test_ranges_and_comments_are_not_negative_speeds():
    text = BOX.format(bw="10 GB/s").replace("}", " # was -5 GB/s\n switch s gpus 0-1 port nv\n}")
    assert parse_text(text, "m.topo")["m"].linktypes["nv"].bw == 10.0
