"""NCCL's example tuner plugin CSV, read back with the plugin's own rules.

The rules (NVIDIA/nccl plugins/tuner/example/plugin.c, commit 5067397c): '#' and
empty lines are skipped; a rule is 8 to 10 comma-separated fields, whitespace
trimmed; the collective, algorithm and protocol are the names listed below; sizes
are read with strtoull (so -1 is the largest); a call takes the first rule whose
min_bytes <= nBytes <= max_bytes.
"""

from __future__ import annotations

import pytest

from msccl_py.cli import main
from msccl_py.errors import MscclError
from msccl_py.tuning.nccl_tuner import tuner_rules

COLLECTIVES = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
ALGORITHMS = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
PROTOCOLS = {"ll", "ll128", "simple"}
ULL_MAX = (1 << 64) - 1


def _strtoull(text: str) -> int:
    v = int(text)
    return v % (1 << 64)        # strtoull("-1") wraps to the largest value


def parse(text: str) -> list[dict]:
    rules = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        assert 8 <= len(fields) <= 10, line
        coll, lo, hi, algo, proto, ch, nodes, ranks = fields[:8]
        assert coll in COLLECTIVES and algo in ALGORITHMS and proto in PROTOCOLS, line
        rules.append({"coll": coll, "lo": _strtoull(lo), "hi": _strtoull(hi), "algo": algo,
                      "proto": proto, "channels": int(ch), "nodes": int(nodes),
                      "ranks": int(ranks)})
    return rules


def pick(rules: list[dict], coll: str, nbytes: int) -> dict | None:
    return next((r for r in rules if r["coll"] == coll and r["lo"] <= nbytes <= r["hi"]), None)


def test_tune_writes_a_conf_the_plugin_reads(tmp_path, capsys):
    conf = tmp_path / "nccl_tuner.conf"
    code = main(["tune", "--collective", "allreduce", "--topology", "dgx-h100", "-o",
                 str(tmp_path / "out"), "--programs", "allreduce_allpairs", "--sizes",
                 "1KiB,1MiB,1GiB", "--instances", "1", "--nccl-tuner-conf", str(conf)])
    out = capsys.readouterr().out
    assert code == 0 and f"wrote {conf}" in out
    rules = parse(conf.read_text())
    # the allreduce ranges tile 0 to the largest size, no gap, no overlap
    rules.sort(key=lambda r: r["lo"])
    assert rules[0]["lo"] == 0 and rules[-1]["hi"] == ULL_MAX
    assert all(a["hi"] + 1 == b["lo"] for a, b in zip(rules, rules[1:]))
    assert pick(rules, "allreduce", 1 << 30)["algo"] == "nvls"
    assert all(r["nodes"] == 1 and r["ranks"] == 8 for r in rules)
    assert "tuner plugin" in (tmp_path / "out" / "report" / "tune.txt").read_text()


def test_rules_say_where_they_differ_from_nccl():
    rules = tuner_rules("dgx-a100", "allgather", sizes="1KiB,1MiB,1GiB", nodes=2)
    assert rules[0].lo == 0 and rules[-1].hi is None and rules[0].nodes == 2
    assert all(r.line().startswith("allgather,") for r in rules)
    with pytest.raises(MscclError, match="not 'alltoall'"):
        tuner_rules("dgx-a100", "alltoall")
    with pytest.raises(MscclError, match="RCCL"):
        tuner_rules("mi300x", "allreduce")
