"""PyTorch's own distributed suite on the msccl backend (:mod:`dist_suite` drives it).

The suite is run as PyTorch runs it for gloo, in a fresh interpreter per run
(it reads ``BACKEND``, ``WORLD_SIZE`` and ``TEMP_DIR`` when imported), and
each test's outcome is read from pytest's JUnit XML. Three runs make the
comparison: gloo; msccl; and msccl again with the suite told it runs gloo
(``MSCCL_SUITE_AS=gloo``: every group it asks for as gloo is made as
msccl), so the tests the suite gates by backend name run on msccl too. A
test passes on msccl when it passes in either msccl run. Only the
``monitored_barrier`` tests are exempt: torch implements that call for gloo
alone.

The default run takes a few tests at world size 2; the whole suite at world
size 3 (about 285 tests a run) is slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")
pytest.importorskip("expecttest", reason="torch.testing._internal needs expecttest")

from repo_paths import REPO  # noqa: E402

HERE = Path(__file__).resolve().parent
EXEMPT = ("monitored_barrier",)


def run_suite(tmp_path: Path, backend: str, world: int, select: tuple[str, ...] = (),
              as_gloo: bool = False, timeout: float = 3000) -> dict[str, str]:
    """Each test's outcome (``passed``, ``skipped``, ``failure``, ``error``) in one run of
    the tests named in ``select`` (all when empty)."""
    tag = f"{backend}{'-as-gloo' if as_gloo else ''}-{world}"
    temp = tmp_path / tag
    temp.mkdir()
    xml = tmp_path / f"{tag}.xml"
    env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(world), TEMP_DIR=str(temp),
               OMP_NUM_THREADS="1", TMPDIR=str(temp),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("MSCCL_SUITE_AS", None)
    if as_gloo:
        env["MSCCL_SUITE_AS"] = "gloo"
    suite = str(HERE / "dist_suite.py")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           f"--junit-xml={xml}",
           *([f"{suite}::TestDistBackendMSCCL::{name}" for name in select] or [suite])]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout)
    assert xml.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("skipped", "failure", "error")]
        outcomes[case.get("name")] = kinds[0] if kinds else "passed"
    return outcomes


def missing_on_msccl(gloo: dict, *msccl_runs: dict) -> list[str]:
    """Tests that pass on gloo and in no msccl run (the exempt ones left out)."""
    return sorted(t for t, v in gloo.items() if v == "passed"
                  and not any(run.get(t) == "passed" for run in msccl_runs)
                  and not any(word in t for word in EXEMPT))


#: the default run's few: two tests the suite runs on every backend and two it gates to gloo by
#: name, in one run where the suite believes it runs gloo (one interpreter importing the
#: suite costs most of the time)
FAST = ("test_all_reduce_sum_async", "test_all_gather_coalesced_with_empty",
        "test_all_reduce_coalesced_sum", "test_sparse_all_reduce_sum")


@pytest.mark.slow   # 27 s of the default run's 5-minute budget on 2 cores
def test_fast_subset_world_2(tmp_path):
    """A few of the suite's tests, two of them gated to gloo by name, pass on msccl groups."""
    run = run_suite(tmp_path, "msccl", 2, FAST, as_gloo=True, timeout=600)
    assert run == {name: "passed" for name in FAST}, run


@pytest.mark.slow   # three runs of the whole suite at world size 3: about 12 minutes on 2 cores
def test_every_gloo_pass_passes_on_msccl_world_3(tmp_path):
    gloo = run_suite(tmp_path, "gloo", 3)
    msccl = run_suite(tmp_path, "msccl", 3)
    as_gloo = run_suite(tmp_path, "msccl", 3, as_gloo=True)
    print(f"gloo passes {sum(v == 'passed' for v in gloo.values())}, msccl "
          f"{sum(v == 'passed' for v in msccl.values())}, msccl as gloo "
          f"{sum(v == 'passed' for v in as_gloo.values())} of {len(gloo)} tests")
    assert sum(v == "passed" for v in gloo.values()) > 50, gloo
    assert missing_on_msccl(gloo, msccl, as_gloo) == []
