"""The topology file format: every statement, composition, and located errors."""

import numpy as np
import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import load, loads
from msccl_py.topologies.topofile import parse_text

FULL = """
# a comment line
machine box {            # trailing comment
  title "Test box"
  model "X1"
  gpus 4
  linktype fast 20 GB/s latency 0.5 us
  linktype slow 100 Gb/s
  unit fast
  link 0 <-> 1 fast x3
  link 1 -> 2 slow
  link 2 -> 1 40 GB/s latency 800 ns
  switch sw gpus 2-3 port fast x2 total 30 GB/s
  nic n0 25 GB/s gpus 0 1
  nic n1 200 Gb/s gpus 2-3
  place 0 0 1
  place 1 1 1
}
cluster pod {
  title "Two boxes"
  machine box
  nodes 2
}
"""


def test_every_statement():
    t = loads(FULL.split("cluster")[0])
    assert t.name == "box" and t.title == "Test box" and t.model == "X1"
    bw = t.bandwidth_matrix()
    assert bw[0, 1] == bw[1, 0] == 60.0                 # x3 of 20 GB/s
    assert bw[1, 2] == 12.5 and bw[2, 1] == 40.0        # 100 Gb/s, raw 40 GB/s
    assert bw[2, 3] == bw[3, 2] == 40.0                 # switch port x2
    assert t.links[1][0] == 3 and t.links[2][1] == 0.625
    g = t.graph
    assert g.edges[0, 1]["latency"] == 0.5 and g.edges[2, 1]["latency"] == pytest.approx(0.8)
    assert g.edges[2, 3]["via"] == "sw"
    assert g.nodes[0]["pos"] == (0.0, 1.0) and g.nodes[2]["pos"] is None
    names = [c[3] for c in t.switches]
    assert names == ["sw_2_out", "sw_2_in", "sw_3_out", "sw_3_in", "sw_total"]
    assert t.switches[-1] == ([2, 3], [2, 3], 1.5, "sw_total")


def test_cluster_block_is_the_main_entry():
    t = loads(FULL)
    assert t.name == "pod" and t.title == "Two boxes" and t.num_nodes() == 8
    assert t.bandwidth(0, 4) == 25.0      # n0 to n0 at 25 GB/s
    assert t.bandwidth(0, 6) == 25.0      # min(25, 25)
    assert t.bandwidth(0, 1) == 60.0      # still local
    assert t.link(0, 5) == 1.25


def test_cluster_network_and_nic_placement():
    text = FULL.replace("  nodes 2\n", "  nodes 3\n  network 400 Gb/s latency 2 us\n"
                        "  nic shared 1 GB/s gpus 0-3\n")
    t = loads(text)
    assert t.num_nodes() == 12 and len(t.devices("nic")) == 3
    assert t.bandwidth(1, 9) == 50.0      # network overrides the NIC bandwidth
    assert t.graph.nodes["network"]["latency"] == 2.0


def test_nodes_override_and_name():
    t = loads(FULL, nodes=4)
    assert t.num_nodes() == 16 and t.name == "boxx4"


def test_extends_inherits_and_replaces_nics(tmp_path):
    path = tmp_path / "mine.topo"
    path.write_text("machine mine extends dgx1 {\n  title \"mine\"\n"
                    "  nic only 50 GB/s gpus 0-7\n}\n")
    t = load(path)
    assert t.links == load("dgx1").links
    assert t.devices("nic") == ["only"]


def test_matrix_orders():
    a = loads("machine m { gpus 2 linktype l 1 GB/s matrix l dst-src { 0 5 0 0 } }")
    b = loads("machine m { gpus 2 linktype l 1 GB/s matrix l src-dst { 0 5 0 0 } }")
    assert a.link(1, 0) == 5 and a.link(0, 1) == 0
    assert b.link(0, 1) == 5 and b.link(1, 0) == 0


def test_unitless_machine_counts_links():
    t = loads("machine m { gpus 2 linktype w matrix w dst-src { 0 2 2 0 } }")
    assert t.bandwidth_unit == "links" and t.bandwidth(0, 1) == 2.0


def test_large_flat_file_parses(tmp_path):
    n = 256
    lines = [f"  link {i} <-> {(i + 1) % n} l x2" for i in range(n)]
    text = "machine big {\n  gpus %d\n  linktype l 25 GB/s\n%s\n}\n" % (n, "\n".join(lines))
    t = loads(text)
    assert t.num_nodes() == n and t.diameter() == n // 2
    np.testing.assert_array_equal(t.bandwidth_matrix().sum(axis=1), 100.0)


BAD = [
    ("machine m {\n  gpus 2\n  link 0 <-> 1 nv\n}", 3, 3, "unknown link type 'nv'"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  link 0 <-> 2 l\n}", 4, 14,
     "GPU 2 out of range"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  link 0 <=> 1 l\n}", 4, 10,
     "expected <-> or ->"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  link 1 <-> 1 l\n}", 4, 3, "to itself"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  link 0 -> 1 l\n  link 0 -> 1 l\n}", 5, 3,
     "duplicate link 0->1"),
    ("machine m {\n  linktype l 1 GB/s\n}", 1, 1, "does not say how many GPUs"),
    ("machine m {\n  link 0 -> 1 l\n  gpus 2\n}", 2, 3, "'gpus N' must come before"),
    ("machine m {\n  gpus 2.5\n}", 2, 8, "GPU count must be an integer"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  link 0 -> 1 l x0\n}", 4, 3, "at least x1"),
    ("machine m {\n  gpus 2\n  linktype l 10 furlongs\n}", 3, 17, "bandwidth unit"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  matrix l dst-src { 0 1 1 }\n}", 4, 3,
     "needs 2x2 = 4 numbers"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  matrix l dst-src { 1 1 1 0 }\n}", 4, 22,
     "diagonal"),
    ("machine m {\n  gpus 4\n  nic n 1 GB/s gpus 0-2 2\n}", 3, 25, "GPU 2 listed twice"),
    ("machine m {\n  gpus 4\n  nic n 1 GB/s gpus 3-1\n}", 3, 21, "empty GPU range"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  link 0 -> 1 l\n", 4, 15, "end of input"),
    ("machine m {\n  gpus 2\n}\nmachine m {\n  gpus 2\n}", 4, 1, "defined twice"),
    ("machine m extends nowhere {\n  gpus 2\n}", 1, 1, "cannot find machine 'nowhere'"),
    ("cluster c {\n  nodes 2\n}", 1, 1, "which machine"),
    ("machine m {\n  gpus 2\n  unit l\n}", 3, 3, "unit 'l' must name"),
    ("machine m {\n  gpus 2\n  frobnicate\n}", 3, 3, "unexpected 'frobnicate'"),
    ("machine m {\n  gpus 2\n  title \"unterminated\n}", 3, 9, "unexpected character"),
]


@pytest.mark.parametrize("text, line, column, message", BAD, ids=[b[3] for b in BAD])
def test_errors_name_line_and_column(text, line, column, message):
    with pytest.raises(TopologyError) as info:
        loads(text, file="bad.topo")
    text_of = str(info.value)
    assert "\n" not in text_of
    assert text_of.startswith(f"bad.topo:{line}:{column}: "), text_of
    assert message in text_of


@pytest.mark.parametrize("text, column, meant", [
    ("machine m {\n  gpus 2\n  linktpye l 1 GB/s\n}", 7, "linktype"),   # lexed as link + tpye
    ("machine m {\n  gpu 2\n}", 3, "gpus"),
    ("machine m {\n  gpus 2\n  linktype l 1 GB/s\n  lnik 0 -> 1 l\n}", 3, "link"),
    ("machine m {\n  gpus 2\n  swich s gpus 0-1 port 1 GB/s\n}", 3, "switch"),
])
def test_misspelt_keyword_gets_did_you_mean(text, column, meant):
    with pytest.raises(TopologyError) as info:
        loads(text, file="bad.topo")
    message = str(info.value)
    assert message.endswith(f"; did you mean `{meant}`?"), message
    assert message.startswith("bad.topo:") and f":{column}: " in message


def test_right_keywords_and_names_get_no_hint():
    with pytest.raises(TopologyError) as info:     # a real keyword in the wrong place
        loads("machine m {\n  gpus 2\n  link\n}", file="bad.topo")
    assert "did you mean" not in str(info.value)


def test_cluster_errors_are_located():
    with pytest.raises(TopologyError, match=r"c.topo:1:1: cluster uses unknown machine|"
                                            r"c.topo:1:1: cannot find machine 'ghost'"):
        loads("cluster c {\n  machine ghost\n}", file="c.topo")
    with pytest.raises(TopologyError, match=r"x.topo:\d+:1: .*names GPU 9"):
        loads("machine m { gpus 2 linktype l 1 GB/s link 0 -> 1 l }\n"
              "cluster c { machine m nodes 2 nic n 1 GB/s gpus 9 }", file="x.topo")


def test_missing_file_and_directory_errors(tmp_path):
    with pytest.raises(TopologyError, match="no such topology file"):
        load(tmp_path / "absent.topo")
    empty = tmp_path / "empty.topo"
    empty.write_text("# nothing here\n")
    with pytest.raises(TopologyError, match="defines no machine or cluster"):
        load(empty)


@pytest.mark.parametrize("order", ["switch first", "link first"])
def test_a_direct_link_and_a_switch_for_one_pair_keep_the_faster_path(order):
    switch = "switch s gpus 0-3 port slow x1"
    link = "link 0 <-> 1 fast x2"
    body = f"{switch} {link}" if order == "switch first" else f"{link} {switch}"
    t = loads(f"machine m {{ gpus 4 linktype slow 10 GB/s linktype fast 25 GB/s {body} }}")
    g = t.graph
    assert g.edges[0, 1].get("via") is None and t.bandwidth(0, 1) == 50.0
    assert g.edges[0, 2]["via"] == "s" and t.bandwidth(0, 2) == 10.0


def test_threadblock_per_protocol():
    spec = parse_text("machine m { gpus 2 threadblock 30 GB/s threadblock LL 20 GB/s "
                      "threadblock LL128 320 Gb/s }")["m"]
    assert spec.threadblock_bw == 30.0 and spec.protocol_threadblock == {"LL": 20.0, "LL128": 40.0}
    with pytest.raises(TopologyError, match="unknown protocol 'Fast'"):
        parse_text("machine m { gpus 2 threadblock Fast 20 GB/s }")


def test_calibrated_launch_and_bandwidth_scale_statements():
    topo = loads("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l "
                 "launch 5 us bandwidth scale 0.9 }")
    assert topo.graph.graph["launch_us"] == 5.0 and topo.graph.graph["bandwidth_scale"] == 0.9
    with pytest.raises(TopologyError, match=r"x\.topo:1:\d+: 'bandwidth scale' must be above 0 "
                                            r"and at most 1 .*got 1\.2"):
        loads("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l bandwidth scale 1.2 }",
              file="x.topo")


def test_bandwidth_share_per_protocol_and_msccl_reaches_the_machine_model():
    from msccl_py.simulate import machine_model
    text = ("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l bandwidth scale 0.9 "
            "bandwidth scale LL 0.5 bandwidth scale MSCCL 0.75 }")
    topo = loads(text)
    assert topo.graph.graph["bandwidth_shares"] == {"LL": 0.5, "MSCCL": 0.75}
    m = machine_model(topo)
    assert m.bw_shares == {"LL": 0.5, "MSCCL": 0.75} and m.bw_scale == 0.9
    # a cluster of copies keeps them
    two = loads(text.replace("bandwidth scale 0.9", "nic n 25 GB/s gpus 0 1 bandwidth scale 0.9")
                + " cluster c { machine m nodes 2 }")
    assert machine_model(two).bw_shares == {"LL": 0.5, "MSCCL": 0.75}
    for bad, why in (("LL 1.5", r"'bandwidth scale LL' must be above 0 and at most 1 .*got 1\.5"),
                     ("LL128 0", r"'bandwidth scale LL128' must be above 0 .*got 0"),
                     ("Tree 0.5", r"'bandwidth scale Tree': the share is per protocol or for RCCL's MSCCL kernels .*not 'Tree'")):
        with pytest.raises(TopologyError, match=r"x\.topo:1:\d+: " + why):
            loads(f"machine m {{ gpus 2 linktype l 25 GB/s link 0 <-> 1 l bandwidth scale {bad} }}",
                  file="x.topo")


def test_msccl_launch_and_fixed_cost_statements_reach_the_machine_model():
    from msccl_py.simulate import machine_model
    text = ("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l launch 3 us "
            "launch MSCCL 4.5 us msccl Simple base 12 us msccl LL base 9500 ns }")
    m = machine_model(loads(text))
    assert m.msccl == {"launch": 4.5, "Simple": 12.0, "LL": 9.5} and m.launch_us == 3.0
    # a -g 8 call pays 7 launches, each at the MSCCL kernels' own time for theirs
    assert m.launch_overhead_us(8) == 21.0 and m.launch_overhead_us(8, msccl=True) == 31.5
    assert not m.launch_overlapped and m.launched_us(10.0, 8) == 31.0
    over = machine_model(loads(text.replace("launch 3 us", "launch 3 us overlapped")))
    assert over.launch_overlapped and over.launch_us == 3.0
    # the process issues the next call's 8 launches while the GPUs run this one
    assert over.launched_us(10.0, 8) == 24.0 and over.launched_us(30.0, 8) == 30.0
    assert over.launched_us(10.0, 1) == 10.0
    two = loads(text.replace("launch 3 us", "nic n 25 GB/s gpus 0 1")
                + " cluster c { machine m nodes 2 }")
    assert machine_model(two).msccl == m.msccl
    for bad, why in (("launch Tree 3 us", r"'launch Tree': a launch time is the machine's .*"
                                          r"or RCCL's MSCCL kernels'"),
                     ("msccl Fast base 3 us", r"unknown protocol 'Fast'"),
                     ("launch MSCCL 3 us overlapped", r"'launch MSCCL \.\.\. overlapped': "
                                                      r"whether launches overlap calls")):
        with pytest.raises(TopologyError, match=r"x\.topo:1:\d+: " + why):
            loads(f"machine m {{ gpus 2 linktype l 25 GB/s link 0 <-> 1 l {bad} }}",
                  file="x.topo")


def test_nvls_step_statement_reaches_the_machine_model():
    from msccl_py.simulate import machine_model
    base = "machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l%s }"
    assert machine_model(loads(base % "")).nvls_step_us is None     # NCCL's efficiency
    assert machine_model(loads(base % " nvls step 2500 ns")).nvls_step_us == 2.5
    two = loads(base % " nvls step 3 us nic n 25 GB/s gpus 0 1" + " cluster c { machine m nodes 2 }")
    assert machine_model(two).nvls_step_us == 3.0


def test_cpu_vendor_is_kept_inherited_and_checked():
    """``cpu NAME`` states the host CPUs' vendor (NCCL's tuning reads it across nodes);
    a machine that extends another inherits it, a cluster of copies keeps it, and a
    vendor NCCL does not know is an error at its position."""
    pair = "machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l nic n 100 Gb/s gpus 0-1 %s }"
    assert loads(pair % "cpu AMD").cpu_vendor == "amd"
    assert loads(pair % "").cpu_vendor is None
    both = loads(pair % "cpu intel" + " machine k extends m { title \"k\" }", nodes=2)
    assert both.cpu_vendor == "intel" and both.num_machines == 2
    with pytest.raises(TopologyError, match=r"x\.topo:1:\d+: unknown CPU vendor 'via'; "
                                            r"expected one of amd, intel, arm"):
        loads(pair % "cpu via", file="x.topo")
