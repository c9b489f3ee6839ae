"""Record msccl-tools' verdicts on MSCCLang programs into this folder's JSON lists.

``examples.json``: msccl-tools' own examples (the list is INVOCATIONS below)::

    python tests/data/msccl_tools/record.py examples /work/ref/msccl-tools \
        /work/ref/venv-msccl/bin/python

``foreign.json``: programs from other public repositories, read from their
mirrored git repositories (``MIRRORS/owner+name/repo``) at the recorded
commit; the invocations are the file's own list, verdicts are refreshed::

    python tests/data/msccl_tools/record.py foreign /work/.mirror \
        /work/ref/venv-msccl/bin/python

New foreign invocations (a JSON list of ``{repo, commit, path, args}``) are
added, and only they recorded, with::

    python tests/data/msccl_tools/record.py add /work/.mirror \
        /work/ref/venv-msccl/bin/python NEW.json

msccl-tools runs each program in an empty folder; its XML is judged by our
verifier against the declared collective's postcondition (custom collectives:
against what msccl_py's symbolic run of the same program computes, when its
Check() passes). An invocation whose own Check() reports wrong chunks is
``check_failed`` even where the XML happens to compute the collective.
The tests replay every invocation with msccl_py.
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
from msccl_py.language.emit import capture  # noqa: E402
from msccl_py.verify import verify  # noqa: E402
from msccl_py.targets.msccl import read_xml  # noqa: E402

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


def _custom_postconditions(sources: Path, program: str, args: list[str]) -> list:
    """Per program made, what msccl_py's symbolic run leaves in the outputs (None if its
    Check() failed); taken whether or not its XML() succeeds."""
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / Path(program).name
        dst.write_text(rename_imports((sources / program).read_text()))
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


MSCCL_TOOLS_COMMIT = "030a750fc56e03fb863ffe48268672d84d4cdc7b"


def run_entry(python: str, program: Path, args: list[str], sources: Path) -> dict:
    """msccl-tools' run of ``program``: exit status, Check() failures, our verdict per XML."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([python, str(program), *args], cwd=tmp, capture_output=True,
                              text=True, timeout=900)
    xmls = _ALGO.findall(proc.stdout)
    entry = {"exit": proc.returncode,
             "check_failures": sum("incorrect" in ln for ln in proc.stdout.splitlines()),
             "xmls": []}
    if proc.returncode != 0:
        entry["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
    posts = None
    for i, xml in enumerate(xmls):
        post = None
        if 'coll="custom"' in xml:
            if posts is None:
                posts = _custom_postconditions(sources, str(program), args)
            post = posts[i] if i < len(posts) else None
        status, reason = judge(xml, post)
        entry["xmls"].append({"status": status, "reason": reason[:300]})
    entry["verdict"] = overall(entry)
    return entry


def record(checkout: Path, python: str) -> dict:
    entries = []
    for program, args in INVOCATIONS:
        entry = {"program": program, "args": args}
        entry.update(run_entry(python, checkout / program, args, checkout))
        print(program, " ".join(args), "->", entry["verdict"], entry.get("error", ""),
              flush=True)
        entries.append(entry)
    return {"provenance": {"repo": "microsoft/msccl-tools", "commit": MSCCL_TOOLS_COMMIT,
                           "command": "python tests/data/msccl_tools/record.py examples "
                                      "CHECKOUT PYTHON (PROGRAM ARGS run by msccl-tools' "
                                      "python in an empty folder)"},
            "invocations": entries}


def overall(entry: dict) -> str:
    """One word per invocation: msccl-tools error, the worst verdict on its XML, or
    check_failed when its own Check() reported wrong chunks."""
    if entry["exit"] != 0 and not entry["xmls"]:
        return "error"
    statuses = [x["status"] for x in entry["xmls"]]
    for worst in ("invalid", "deadlock", "wrong", "unjudged"):
        if worst in statuses:
            return worst
    if entry["check_failures"]:
        return "check_failed"
    return "correct" if statuses and entry["exit"] == 0 else "error"


def foreign_source(mirrors: Path, entry: dict) -> str:
    """A foreign program's text at its recorded commit."""
    git_dir = mirrors / entry["repo"].replace("/", "+", 1) / "repo"
    return subprocess.run(["git", "--git-dir", str(git_dir), "show",
                           f"{entry['commit']}:{entry['path']}"], capture_output=True, text=True,
                          check=True).stdout


def record_foreign(mirrors: Path, python: str, new: list[dict] | None = None) -> dict:
    """Refresh every recorded invocation, or (``new``) add and record only those not there."""
    out = HERE / "foreign.json"
    data = json.loads(out.read_text())
    todo = data["invocations"]
    if new is not None:
        seen = {_key(e) for e in todo}
        todo = [dict(e) for e in new if _key(e) not in seen]
        data["invocations"].extend(todo)
    with tempfile.TemporaryDirectory() as tmp:
        for entry in todo:
            path = Path(tmp) / entry["repo"].replace("/", "+") / entry["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(foreign_source(mirrors, entry))
            entry.update(run_entry(python, path, entry["args"], path.parent))
            print(entry["repo"], entry["path"], " ".join(entry["args"]), "->", entry["verdict"],
                  flush=True)
    data["provenance"] = {"command": "python tests/data/msccl_tools/record.py foreign MIRRORS "
                                     "PYTHON (PYTHON: an interpreter with microsoft/msccl-tools "
                                     "installed; PROGRAM ARGS run in an empty folder)",
                          "msccl_tools_commit": MSCCL_TOOLS_COMMIT}
    return data


def _key(entry: dict) -> tuple:
    return entry["repo"], entry["commit"], entry["path"], tuple(entry["args"])


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "examples":
        result, name = record(Path(sys.argv[2]), sys.argv[3]), "examples.json"
    elif mode == "add":
        new = json.loads(Path(sys.argv[4]).read_text())
        result, name = record_foreign(Path(sys.argv[2]), sys.argv[3], new), "foreign.json"
    else:
        result, name = record_foreign(Path(sys.argv[2]), sys.argv[3]), "foreign.json"
    (HERE / name).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {HERE / name}")
