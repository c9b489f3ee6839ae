"""Performance-model statements in topology files: threadblock, memory, protocol."""

from __future__ import annotations

import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import load, loads
from msccl_py.topologies.topofile import parse_text

BASE = "machine m { gpus 2 linktype l 25 GB/s latency 700 ns link 0 <-> 1 l %s }"


def test_statements_are_read_and_reach_the_graph():
    spec = parse_text(BASE % "threadblock 160 Gb/s memory 2 GB/s "
                             "protocol LL128 latency 2 us base 10 us protocol LL base 4 us")["m"]
    assert spec.threadblock_bw == 20.0 and spec.memory_bw == 2.0
    assert spec.protocols == {"LL128": (2.0, 10.0), "LL": (None, 4.0)}
    assert spec.edges[(0, 1)].latency == pytest.approx(0.7)
    meta = loads(BASE % "threadblock 20 GB/s").graph.graph
    assert meta["threadblock_bw"] == 20.0 and meta["protocols"] == {}


def test_extends_inherits_the_model():
    specs = parse_text(BASE % "threadblock 20 GB/s" + " machine n extends m { title \"n\" }")
    assert specs["n"].threadblock_bw == 20.0


@pytest.mark.parametrize("stmt,message", [
    ("threadblock 0 GB/s", "'threadblock' needs a positive bandwidth"),
    ("protocol Fast", "unknown protocol 'Fast'"),
])
def test_bad_statements_name_the_line(stmt, message):
    with pytest.raises(TopologyError, match=r"<text>:1:\d+: " + message):
        loads(BASE % stmt)


@pytest.mark.parametrize("name", ["dgx1", "dgx-a100", "dgx-h100", "hgx-h200", "mi250", "mi300x",
                                  "ndv5"])
def test_shipped_machines_give_every_link_a_latency(name):
    graph = load(name).graph
    lat = [d["latency"] for a, b, d in graph.edges(data=True)
           if isinstance(a, int) and isinstance(b, int)]
    assert lat and all(x is not None and x > 0 for x in lat)
