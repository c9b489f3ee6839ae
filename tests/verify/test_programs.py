"""Every program of the library compiles, verifies against its own collective, and runs."""

from pathlib import Path

import numpy as np
import pytest

library = pytest.importorskip("msccl_py.library")

from msccl_py.cli import main
from msccl_py.runtime import reference
from msccl_py.runtime.expected import expected
from msccl_py.plan.tables import plan_for
from msccl_py.verify import verify

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
SPECS = {s.name: s for s in library.programs()}


def ranks_for(spec):
    return next(n for n in (4, 8, 3, 2, 16) if spec.supports(n))


def target(alg):
    return "msccl" if alg.collective == "custom" else "msccl-executor"


def test_library_has_programs():
    assert len(SPECS) >= 20


@pytest.mark.parametrize("name", sorted(SPECS))
def test_program_verifies_and_runs(name):
    prog = library.build_program(name, ranks_for(SPECS[name]))
    alg = prog.lower()
    v = verify(alg, target=target(alg), postcondition=prog.collective)
    assert v.ok, v.report()
    cc = plan_for(alg).call_chunks
    xs = [np.arange(int(cc[r, 0]) * 3, dtype=np.float64) + 100 * r for r in range(alg.ngpus)]
    outs = reference.run(alg, xs)
    if alg.collective != "custom":
        for o, e in zip(outs, expected(alg, xs)):
            if e is not None:
                np.testing.assert_array_equal(o, e)


def test_custom_collective_check_catches_wrong_result():
    prog = library.build_program("alltonext_forward", 8)
    alg = prog.lower()
    # rank 0 sends its (unwritten) output instead of its input
    send = alg.gpus[0].threadblocks[0].steps[0]
    assert send.op == "send"
    send.src = type(send.src)("o", send.src.offset)
    v = verify(alg, target="msccl", postcondition=prog.collective)
    assert v.status == "incorrect" and "the collective's check" in v.reason


def test_cli_runs_a_program_file(capsys):
    assert main(["run", str(PROGRAMS / "allreduce_ring.py"), "4", "--bytes", "96KiB"]) == 0
    assert ": correct," in capsys.readouterr().out
