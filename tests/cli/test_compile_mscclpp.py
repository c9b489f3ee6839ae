"""``msccl-py compile --target mscclpp`` from the command line: plans written only when they verify."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repo_paths import PROGRAMS


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "msccl_py", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_library_program_compiles_verifies_and_runs(tmp_path):
    out = tmp_path / "ring.json"
    r = _cli("compile", "allreduce_ring", "--ranks", "8", "--target", "mscclpp", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "verified: allreduce postcondition holds" in r.stderr
    assert json.loads(out.read_text())["collective"] == "allreduce"
    v = _cli("verify", out)
    assert v.returncode == 0 and v.stdout.startswith("ok: allreduce postcondition holds"), v.stdout + v.stderr
    run = _cli("run", out, "--backend", "reference", "--bytes", "64K", "--dtype", "int32", "--op", "max")
    assert run.returncode == 0 and "int32 max" in run.stdout and ": correct," in run.stdout, \
        run.stdout + run.stderr


def _channel_types(path) -> set[str]:
    return {c["channel_type"] for g in json.loads(path.read_text())["gpus"] for c in g["channels"]}


def test_hierarchical_program_keeps_its_node_layout(tmp_path):
    out = tmp_path / "h.json"
    r = _cli("compile", "allgather_hierarchical", "--ranks", "8", "--target", "mscclpp", "-o", out)
    assert r.returncode == 0, r.stderr
    assert _channel_types(out) == {"memory", "port"}       # 8 ranks: 2 nodes x 4
    r = _cli("compile", "allgather_hierarchical", "--ranks", "8", "--gpus-per-node", "8",
             "--target", "mscclpp", "-o", out)
    assert r.returncode == 0, r.stderr
    assert _channel_types(out) == {"memory"}


def test_gpus_per_node_option_on_a_program_file(tmp_path):
    out = tmp_path / "ring.json"
    r = _cli("compile", "--target", "mscclpp", "--gpus-per-node", "4", "-o", out,
             PROGRAMS / "allreduce_ring.py", "8", "1")
    assert r.returncode == 0, r.stderr
    assert _channel_types(out) == {"memory", "port"}


def test_ring_program_file(tmp_path):
    out = tmp_path / "ring.json"
    r = _cli("compile", "--target", "mscclpp", "-o", out, PROGRAMS / "allreduce_ring.py", "8", "2")
    assert r.returncode == 0, r.stderr
    assert "allreduce_ring_2ch: MSCCL++ plan" in r.stderr


def test_library_program_widens_its_spread_to_fit_the_executor(tmp_path):
    # one 16-rank ring has 31 steps per threadblock, past what the executor's 64 operations hold
    # (12 steps of up to 5); left unset, channels grows until they fit (as XML targets' step limits do)
    out = tmp_path / "ring.json"
    r = _cli("compile", "allreduce_ring", "--ranks", "16", "--target", "mscclpp", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "allreduce_ring_3ch: MSCCL++ plan" in r.stderr and "verified: allreduce" in r.stderr
    plan = json.loads(out.read_text())
    assert all(len(tb["ops"]) <= 64 for g in plan["gpus"] for tb in g["threadblocks"])
    # the user's own choice stays: its long threadblocks run as segments, one after another
    r = _cli("compile", "allreduce_ring", "--ranks", "16", "--param", "channels=1", "--target", "mscclpp",
             "-o", out)
    assert r.returncode == 0 and "allreduce_ring_1ch: MSCCL++ plan" in r.stderr, r.stderr
    plan = json.loads(out.read_text())
    assert len(plan["gpus"][0]["threadblocks"]) > 1
    assert all(len(tb["ops"]) <= 64 for g in plan["gpus"] for tb in g["threadblocks"])


def test_refusals_are_one_line_exit_2(tmp_path):
    out = tmp_path / "x.json"
    cases = [(["broadcast_chain", "--ranks", "8"], "'broadcast' has no MSCCL++ executor counterpart"),
             (["allreduce_ring", "--ranks", "4", "--gpus-per-node", "0"], "--gpus-per-node must be at least 1")]
    for args, message in cases:
        r = _cli("compile", *args, "--target", "mscclpp", "-o", out)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
        assert not out.exists()


def test_plan_to_standard_output():
    r = _cli("compile", "reduce_scatter_ring", "--ranks", "4", "--target", "mscclpp", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["collective"] == "reducescatter"


# -- message sizes: the executor runs a plan only at multiples of buffer_alignment x its chunks -------

#: every library allreduce, allgather, reduce_scatter and alltoall program (`msccl-py list`)
COLLECTIVE_PROGRAMS = [
    "allgather_allpairs", "allgather_hierarchical", "allgather_recursive_doubling", "allgather_ring",
    "allreduce_allpairs", "allreduce_binomial_tree", "allreduce_hierarchical", "allreduce_oneshot",
    "allreduce_recursive_halving_doubling", "allreduce_ring", "allreduce_rs_ag", "alltoall_allpairs",
    "alltoall_three_step", "alltoall_two_step", "nccl_ring", "nccl_ring_allgather",
    "nccl_ring_reduce_scatter", "nccl_tree", "reduce_scatter_allpairs", "reduce_scatter_recursive_halving",
    "reduce_scatter_ring"]
#: the ones whose natural chunk count (7 rings or trees on a fully connected 8-GPU machine) no power
#: of two divides
SEVEN = {"nccl_ring": "rings", "nccl_ring_allgather": "rings", "nccl_ring_reduce_scatter": "rings",
         "nccl_tree": "trees"}


def _emit_and_run(name, tmp_path, capsys, *params):
    from msccl_py.cli import main
    from msccl_py.plan.mscclpp.geometry import geometry
    from msccl_py.targets.mscclpp.read import read_plan
    out = tmp_path / f"{name}.json"
    assert main(["compile", name, "--ranks", "8", *params, "--target", "mscclpp", "-o", str(out)]) == 0
    compiled = capsys.readouterr().err
    plan = read_plan(str(out))
    for k in range(20, 31):                           # 1 MiB .. 1 GiB pass the executor's size rule
        geometry(plan, 1 << k)
    assert main(["verify", str(out)]) == 0
    assert main(["run", str(out), "--backend", "reference", "--bytes", "1MiB"]) == 0
    ran = capsys.readouterr().out
    assert "correct" in ran, ran
    return compiled, plan


@pytest.mark.parametrize("name", [n if n in ("nccl_ring", "nccl_tree") else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(SEVEN)])
def test_seven_rings_become_the_nearest_count_powers_of_two_divide(name, tmp_path, capsys):
    knob = SEVEN[name]
    err, plan = _emit_and_run(name, tmp_path, capsys)
    assert f"note: {name}: {knob}=7 cuts each buffer into" in err
    assert f"using {knob}=8 instead" in err and f"pass --param {knob}=7 to keep 7" in err
    assert plan.gpus[0].input_chunks in (8, 64)


def test_a_users_count_stays_with_a_note_on_the_sizes_it_runs(tmp_path, capsys):
    from msccl_py.cli import main
    out = tmp_path / "tree.json"
    assert main(["compile", "nccl_tree", "--ranks", "8", "--param", "trees=7", "--target", "mscclpp",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("note: nccl_tree: the MSCCL++ executor runs this plan only at message sizes that are multiples "
            "of 112 B (7 chunks), so at no power of two such as 1 MiB; --param trees=8 would run at every "
            "power of two from 1 MiB") in err
    assert json.loads(out.read_text())["gpus"][0]["input_chunks"] == 7
    assert main(["run", str(out), "--backend", "reference", "--bytes", "1MiB"]) == 2
    assert "multiples of 112 B" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("name", COLLECTIVE_PROGRAMS)
def test_every_collective_program_runs_at_one_mebibyte(name, tmp_path, capsys):
    _emit_and_run(name, tmp_path, capsys)


def test_program_file_plan_gets_the_size_note(tmp_path, capsys):
    from msccl_py.cli import main
    out = tmp_path / "ring6.json"
    assert main(["compile", "--target", "mscclpp", "-o", str(out), str(PROGRAMS / "allreduce_ring.py"), "6", "1"]) == 0
    assert ("note: allreduce_ring_1ch: the MSCCL++ executor runs this plan only at message sizes that are "
            "multiples of 96 B (6 chunks), so at no power of two such as 1 MiB") in capsys.readouterr().err
