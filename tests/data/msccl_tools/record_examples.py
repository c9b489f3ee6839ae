"""Record msccl-tools' verdict on each example invocation into examples.json.

Run from the repository root with msccl-tools' own interpreter available::

    python tests/data/msccl_tools/record_examples.py /work/ref/msccl-tools \
        /work/ref/venv-msccl/bin/python

For every invocation below, msccl-tools runs the program; its XML is judged
by our verifier against the declared collective's postcondition (custom
collectives: against what msccl_py's symbolic run of the same program
computes, when its Check() passes). The list of invocations is the one the
test replays with msccl_py.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
sys.path.insert(0, str(HERE.parents[1] / "language"))

from mscclang_reference import rename_imports  # noqa: E402
from msccl_py.errors import MscclError  # noqa: E402
from msccl_py.language.program import capture  # noqa: E402
from msccl_py.verify import verify  # noqa: E402
from msccl_py.xml import read_xml  # noqa: E402

E = "examples/mscclang/"
#: (program, args): the argparse arguments, small and larger, with instances and protocols
INVOCATIONS = [
    (E + "allgather_a100_pcie.py", ["4", "1"]),
    (E + "allgather_a100_pcie.py", ["8", "2", "--protocol", "Simple"]),
    (E + "allgather_allpairs.py", ["4", "1"]),
    (E + "allgather_allpairs.py", ["8", "1"]),
    (E + "allgather_allpairs.py", ["8", "2", "--protocol", "LL"]),
    (E + "allgather_recursive_doubling.py", ["4", "1"]),
    (E + "allgather_recursive_doubling.py", ["8", "2", "--protocol", "LL128"]),
    (E + "allgather_ring.py", ["4", "1", "1"]),
    (E + "allgather_ring.py", ["8", "4", "1"]),
    (E + "allgather_ring.py", ["8", "8", "2", "--protocol", "Simple"]),
    (E + "allreduce_1step.py", ["4", "1"]),
    (E + "allreduce_1step.py", ["8", "2", "--protocol", "Simple"]),
    (E + "allreduce_a100_allpairs.py", ["4", "1"]),
    (E + "allreduce_a100_allpairs.py", ["8", "1"]),
    (E + "allreduce_a100_allpairs.py", ["8", "2", "--protocol", "LL128"]),
    (E + "allreduce_a100_allpairs_v2.py", ["4", "1"]),
    (E + "allreduce_a100_allpairs_v2.py", ["8", "2", "--protocol", "Simple"]),
    (E + "allreduce_a100_multinode_allpairs.py", ["2", "1"]),
    (E + "allreduce_a100_multinode_allpairs.py", ["4", "1"]),
    (E + "allreduce_a100_multinode_allpairs.py", ["8", "2"]),
    (E + "allreduce_a100_ncv4.py", ["4", "1"]),
    (E + "allreduce_a100_ncv4.py", ["4", "2", "--protocol", "Simple"]),
    (E + "allreduce_a100_ncv4_v2.py", ["4", "1"]),
    (E + "allreduce_a100_ncv4_v2.py", ["4", "2", "--protocol", "Simple"]),
    (E + "allreduce_a100_pcie_hierarchical.py", ["4", "1"]),
    (E + "allreduce_a100_pcie_hierarchical.py", ["8", "1"]),
    (E + "allreduce_a100_pcie_hierarchical.py", ["8", "2", "--protocol", "Simple"]),
    (E + "allreduce_a100_recursive_doubling_halving.py", ["1", "1"]),
    (E + "allreduce_a100_recursive_doubling_halving.py", ["2", "1"]),
    (E + "allreduce_a100_recursive_doubling_halving.py", ["2", "2", "--protocol", "Simple"]),
    (E + "allreduce_a100_recursive_doubling_halving.py", ["3", "1"]),
    (E + "allreduce_a100_ring.py", ["4", "1", "1"]),
    (E + "allreduce_a100_ring.py", ["8", "4", "1"]),
    (E + "allreduce_a100_ring.py", ["8", "8", "2", "--protocol", "Simple"]),
    (E + "allreduce_binomial_tree.py", ["4", "1", "1"]),
    (E + "allreduce_binomial_tree.py", ["8", "2", "1"]),
    (E + "allreduce_binomial_tree.py", ["8", "2", "2", "--protocol", "LL"]),
    (E + "allreduce_dgx1.py", ["2", "1"]),
    (E + "allreduce_ndv2.py", ["1"]),
    (E + "allreduce_ndv2.py", ["2"]),
    (E + "allreduce_recursive_doubling_halving.py", ["4", "1"]),
    (E + "allreduce_recursive_doubling_halving.py", ["8", "1"]),
    (E + "allreduce_recursive_doubling_halving.py", ["8", "2", "--protocol", "Simple"]),
    (E + "alltoall_a100_three_step.py", ["2", "4", "1"]),
    (E + "alltoall_a100_three_step.py", ["3", "4", "2"]),
    (E + "alltoall_a100_three_step.py", ["9", "8", "2"]),
    (E + "alltoall_a100_three_step.py", ["16", "8", "2", "--ib_connections", "1"]),
    (E + "alltoall_a100_two_step.py", ["2", "4"]),
    (E + "alltoall_a100_two_step.py", ["3", "8"]),
    (E + "alltoall_a100_two_step.py", ["4", "8", "--protocol", "LL"]),
    (E + "alltoall_allpairs.py", ["4", "1"]),
    (E + "alltoall_allpairs.py", ["8", "2", "--protocol", "LL"]),
    (E + "alltonext_backward.py", ["2", "1"]),
    (E + "alltonext_backward.py", ["3", "2"]),
    (E + "alltonext_forward.py", ["2", "1"]),
    (E + "alltonext_forward.py", ["3", "2"]),
    (E + "hierarchical_allreduce.py", ["4", "2", "1"]),
    (E + "hierarchical_allreduce.py", ["4", "2", "1", "--schedule", "manual"]),
    (E + "hierarchical_allreduce.py", ["8", "2", "1"]),
    (E + "hierarchical_allreduce.py", ["2", "2", "2", "--protocol", "LL"]),
    (E + "pipeline_a100_allpairs.py", ["4", "1"]),
    (E + "pipeline_a100_allpairs.py", ["8", "1"]),
    (E + "pipeline_a100_ring.py", ["4", "1", "1"]),
    (E + "pipeline_a100_ring.py", ["8", "4", "1"]),
    (E + "reducegather.py", ["4", "2"]),
    (E + "reducegather.py", ["8", "2", "--instances", "2"]),
    (E + "reducegather.py", ["8", "4", "--protocol", "LL"]),
    (E + "simple/allgather_ring.py", []),
    (E + "simple/allreduce_ring.py", ["4", "1"]),
    (E + "simple/allreduce_ring.py", ["8", "2"]),
    (E + "simple/custom_collective.py", []),
]

_ALGO = re.compile(r"<algo\b.*?</algo>", re.S)


def judge(xml: str, postcondition=None) -> tuple[str, str]:
    """Our verifier's verdict on one XML: correct / wrong / deadlock / invalid."""
    try:
        alg = read_xml(xml)
    except MscclError as exc:
        return "invalid", str(exc)
    if alg.collective == "custom" and postcondition is None:
        return "unjudged", "custom collective without a postcondition"
    v = verify(alg, target="msccl", postcondition=postcondition)
    status = {"ok": "correct", "incorrect": "wrong"}.get(v.status, v.status)
    return status, v.reason


def _custom_postconditions(checkout: Path, program: str, args: list[str]) -> list:
    """Per program made, what msccl_py's symbolic run leaves in the outputs (None if its
    Check() failed); taken whether or not its XML() succeeds."""
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / Path(program).name
        dst.write_text(rename_imports((checkout / program).read_text()))
        old_argv = sys.argv
        sys.argv = [str(dst), *args]
        try:
            with capture(lambda prog, text: None) as ctx, \
                    contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                try:
                    runpy.run_path(str(dst), run_name="__main__")
                except Exception:  # the XML's verdict comes from the verifier, not from this
                    pass
                made = list(ctx.programs)
        finally:
            sys.argv = old_argv
    return [p.postcondition() if p.check_results and all(p.check_results) else None
            for p in made]


def record(checkout: Path, python: str) -> dict:
    commit = (checkout / ".commit").read_text().strip() if (checkout / ".commit").exists() else ""
    entries = []
    for program, args in INVOCATIONS:
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run([python, str(checkout / program), *args], cwd=tmp,
                                  capture_output=True, text=True, timeout=900)
        xmls = _ALGO.findall(proc.stdout)
        check_lines = [ln for ln in proc.stdout.splitlines() if "is incorrect" in ln]
        entry = {"program": program, "args": args, "exit": proc.returncode,
                 "check_failures": len(check_lines), "xmls": []}
        if proc.returncode != 0:
            entry["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
        posts = None
        for i, xml in enumerate(xmls):
            post = None
            if 'coll="custom"' in xml:
                posts = posts if posts is not None else _custom_postconditions(
                    checkout, program, args)
                post = posts[i] if i < len(posts) else None
            status, reason = judge(xml, post)
            entry["xmls"].append({"status": status, "reason": reason[:300]})
        entry["verdict"] = overall(entry)
        print(program, " ".join(args), "->", entry["verdict"],
              entry.get("error", ""), [x["status"] for x in entry["xmls"]], flush=True)
        entries.append(entry)
    return {"provenance": {"repo": "microsoft/msccl-tools", "commit": commit,
                           "command": "python tests/data/msccl_tools/record_examples.py "
                                      "CHECKOUT PYTHON (PROGRAM ARGS run by msccl-tools' "
                                      "python in an empty folder)"},
            "invocations": entries}


def overall(entry: dict) -> str:
    """One word per invocation: msccl-tools error, or the worst verdict on its XML."""
    if entry["exit"] != 0 and not entry["xmls"]:
        return "error"
    statuses = [x["status"] for x in entry["xmls"]]
    for worst in ("invalid", "deadlock", "wrong", "unjudged"):
        if worst in statuses:
            return worst
    return "correct" if statuses and entry["exit"] == 0 else "error"


if __name__ == "__main__":
    data = record(Path(sys.argv[1]), sys.argv[2])
    out = HERE / "examples.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}")
