"""msccl-tools' own MSCCLang examples and tests, replayed with msccl_py.

The invocations and msccl-tools' verdict on each (its XML judged by our
verifier) are in tests/data/msccl_tools/examples.json. Rule: where
msccl-tools' XML is correct, ours is correct; where it is wrong, deadlocks, is
invalid or msccl-tools fails, ours is correct or refused. The programs come
from a msccl-tools checkout ($MSCCL_TOOLS_DIR, /work/ref/msccl-tools, or the
mirror); without one these tests skip.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from msccl_py.errors import WrongResultError
from repo_paths import REPO
from mscclang_reference import check_plain_run, find_checkout, rename_imports, run_renamed

DATA = json.loads((REPO / "tests" / "data" / "msccl_tools" / "examples.json").read_text())

#: one invocation per semantic the default run guards (the rest run with -m slow)
FAST = {
    ("allgather_allpairs.py", "4 1"),                # in-place destination, sender's index
    ("alltoall_a100_two_step.py", "2 4"),            # get_dst_rank / get_dst_index
    ("alltoall_a100_three_step.py", "2 4 1"),        # tuple scratch names
    ("alltonext_forward.py", "2 1"),                 # custom in-place with separate buffers
    ("allreduce_a100_pcie_hierarchical.py", "4 1"),  # msccl-tools' XML is wrong
    ("allreduce_1step.py", "8 2 --protocol Simple"),  # msccl-tools' XML deadlocks
    ("allreduce_binomial_tree.py", "4 1 1"),         # fails under msccl-tools too
    ("allgather_ring.py", "8 4 1"),                  # channels per ring, instances
    ("custom_collective.py", ""),                    # custom collectives, two programs
}


def _params():
    for entry in DATA["invocations"]:
        key = (entry["program"].rsplit("/", 1)[-1], " ".join(entry["args"]))
        marks = () if key in FAST else (pytest.mark.slow,)
        yield pytest.param(entry, id=f"{key[0]}[{key[1]}]", marks=marks)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    found = find_checkout(tmp_path_factory.mktemp("msccl-tools"))
    if found is None:
        pytest.skip("no msccl-tools checkout (set MSCCL_TOOLS_DIR)")
    return found


@pytest.mark.parametrize("entry", list(_params()))
def test_example_matches_msccl_tools_verdict(checkout, entry, capsys):
    outcome, detail = run_renamed(checkout / entry["program"], entry["args"])
    capsys.readouterr()
    if entry["verdict"] == "correct":
        assert outcome == "correct", detail
    else:
        assert outcome in ("correct", "refused"), f"msccl-tools: {entry['verdict']}; {detail}"


#: the plain-run check in the default run: a wrong XML from msccl-tools, refused here
PLAIN_FAST = {("allreduce_a100_pcie_hierarchical.py", "4 1")}


@pytest.mark.parametrize("entry", [
    pytest.param(e, id=f"{k[0]}[{k[1]}]", marks=() if k in PLAIN_FAST else (pytest.mark.slow,))
    for e in DATA["invocations"]
    for k in [(e["program"].rsplit("/", 1)[-1], " ".join(e["args"]))]])
def test_example_as_a_plain_script_is_all_or_nothing(checkout, entry):
    """`python PROGRAM ARGS > out.xml` exits 0 with verified XML where msccl-tools' XML is
    correct; otherwise that, or non-zero with empty stdout and `error:` first on stderr."""
    outcome = check_plain_run(checkout / entry["program"], entry["args"])
    if entry["verdict"] == "correct":
        assert outcome == "correct"


def test_recorded_list_covers_every_example(checkout):
    programs = {e["program"] for e in DATA["invocations"]}
    on_disk = {str(p.relative_to(checkout)) for p in (checkout / "examples" / "mscclang").rglob("*.py")}
    assert on_disk <= programs


#: tests that read msccl-tools' instruction DAG objects; test_mscclang_semantics.py checks
#: the same properties on our XML
INTERNAL = ("test_program_order", "test_instruction_fusion")
#: tests whose program is wrong for its collective: msccl-tools prints its XML anyway,
#: XML() here refuses it (a refusal is a failure)
REFUSED = {"test_scratch_buffers": WrongResultError}


def test_msccl_tools_test_language_passes_with_imports_renamed(checkout, tmp_path, capsys):
    """Every test function of msccl-tools' tests/test_language.py, called as pytest would."""
    src = checkout / "tests" / "test_language.py"
    if not src.is_file():
        pytest.skip("checkout has no tests/test_language.py")
    path = tmp_path / "msccl_tools_test_language.py"
    path.write_text(rename_imports(src.read_text()))
    spec = importlib.util.spec_from_file_location("msccl_tools_test_language", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = [n for n in vars(module) if n.startswith("test_") and callable(getattr(module, n))]
    assert len(names) >= 17
    failures = []
    for name in names:
        if name in INTERNAL:
            continue
        try:
            getattr(module, name)()
        except Exception as exc:  # report every failing test, not only the first
            if type(exc) is not REFUSED.get(name):
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
        else:
            if name in REFUSED:
                failures.append(f"{name}: the wrong program was not refused")
    capsys.readouterr()
    assert not failures, "\n".join(failures)
