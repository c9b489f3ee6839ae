"""MSCCLang programs from other public repositories, replayed with msccl_py.

tests/data/msccl_tools/foreign.json lists them (repository, commit, path,
arguments) with msccl-tools' verdict on each. The rule is the one for
msccl-tools' own examples: correct where msccl-tools' XML is correct, else
correct or refused. A program whose repository is not mirrored here skips.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo_paths import REPO
from mscclang_reference import check_plain_run, foreign_source, run_renamed

DATA = json.loads((REPO / "tests" / "data" / "msccl_tools" / "foreign.json").read_text())

#: a few per repository in the default run; the rest run with -m slow
FAST = {
    ("robert-bayer/AI_ML_Architecture_Lab5", "part3/bi_ring_allreduce.py"),
    ("robert-bayer/AI_ML_Architecture_Lab5", "part4/uni_ring_mesh.py"),
    ("PeisongZhang/msccl-tools", "examples/mscclang/fullmesh.py"),
    ("Azure/msccl-tools", "examples/mscclang/reducescatter_allpairs.py"),
    ("dailiuyao/msccl_tools_lyd", "examples/mscclang/allreduce_a100_binomial_hierarchical_ch4.py"),
    ("Alessio-Olivieri/msccl-tools", "examples/mscclang/allreduce_swing_bandwidth_at_once.py"),
    ("Nonene2546/msccl-2host-2gpu", "gen_2gpu_ag.py"),
    ("cowanmeg/sccl", "examples/mscclang/allreduce_mi200_ring.py"),
    ("A-Dying-Pig/msccl-tools", "examples/mscclang/alltoall_FLASH.py"),
}


def _params(fast: set) -> list:
    """Every invocation; in the default run those of the ``fast`` programs, named by
    (repository, path) or by (repository, path, arguments)."""
    def quick(e) -> bool:
        return (e["repo"], e["path"]) in fast or (e["repo"], e["path"], *e["args"]) in fast
    return [pytest.param(e, id=f"{e['repo']}:{e['path']}[{' '.join(e['args'])}]",
                         marks=() if quick(e) else (pytest.mark.slow,))
            for e in DATA["invocations"]]


@pytest.mark.parametrize("entry", _params(FAST))
def test_foreign_program_matches_msccl_tools_verdict(entry, tmp_path, capsys):
    text = foreign_source(entry["repo"], entry["commit"], entry["path"])
    if text is None:
        pytest.skip(f"{entry['repo']} is not mirrored here")
    path = tmp_path / Path(entry["path"]).name
    path.write_text(text)
    outcome, detail = run_renamed(path, entry["args"])
    capsys.readouterr()
    if entry["verdict"] == "correct":
        assert outcome == "correct", detail
    else:
        assert outcome in ("correct", "refused"), f"msccl-tools: {entry['verdict']}; {detail}"


#: the plain-run check in the default run: a program msccl-tools gets right (a refused one:
#: test_msccl_tools_examples.py)
PLAIN_FAST = {("cowanmeg/sccl", "examples/mscclang/allreduce_mi200_ring.py", "1", "2")}


@pytest.mark.parametrize("entry", _params(PLAIN_FAST))
def test_foreign_program_as_a_plain_script_is_all_or_nothing(entry, tmp_path):
    """`python PROGRAM ARGS > out.xml`: verified XML and exit 0 where msccl-tools is right,
    else that or a non-zero exit with nothing on stdout and `error:` first on stderr."""
    text = foreign_source(entry["repo"], entry["commit"], entry["path"])
    if text is None:
        pytest.skip(f"{entry['repo']} is not mirrored here")
    path = tmp_path / Path(entry["path"]).name
    path.write_text(text)
    outcome = check_plain_run(path, entry["args"])
    if entry["verdict"] == "correct":
        assert outcome == "correct"
