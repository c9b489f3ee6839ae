"""``msccl-py verify`` and ``msccl-py run``: output, exit codes, and bad input."""

from pathlib import Path

import pytest

from msccl_py.cli import main
from msccl_py.cli.run import BACKENDS, get_backend
from msccl_py.errors import MscclRuntimeError
from msccl_py.verify.samples import ring_allreduce
from msccl_py.targets.msccl import write_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "verify"
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "xml"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared is not present")

GOOD = """<algo name="swap" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_verify_ok(tmp_path, capsys):
    assert main(["verify", write(tmp_path, "ag.xml", GOOD), "--target", "msccl"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok: allgather postcondition holds")
    assert any(line.strip().startswith("small messages") for line in out)
    assert any(line.strip().startswith("large messages") for line in out)


def test_verify_deadlock_and_bytes(tmp_path, capsys):
    path = DATA / "ring_allreduce_4x1_cnt2_simple.xml"
    assert main(["verify", str(path), "--target", "msccl"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("deadlock: deadlocks with large messages: rank 0 tb 0 step 1")
    # 8 chunks of 1 KiB each: one transfer per step, no deadlock
    assert main(["verify", str(path), "--target", "msccl", "--bytes", "8KiB"]) == 0
    assert "small messages" in capsys.readouterr().out
    assert main(["verify", str(path), "--target", "msccl", "--bytes", "64MiB"]) == 1


def test_verify_incorrect_exit_1(capsys):
    assert main(["verify", str(DATA / "ring_allreduce_3_doublecount.xml"),
                 "--target", "msccl"]) == 1
    assert capsys.readouterr().out.startswith("incorrect: rank 0 output chunk 1 holds")


def test_verify_size_that_does_not_divide(tmp_path, capsys):
    path = write(tmp_path, "ag.xml", GOOD)
    assert main(["verify", path, "--bytes", "10"]) == 2
    err = capsys.readouterr().err
    assert "multiples of 8 bytes" in err and "16 B" in err


BAD = {
    "notxml.xml": ("hello, not xml\n", "notxml.xml:1: not well-formed XML"),
    "trunc.xml": (GOOD[:420], "trunc.xml:"),
    "noattr.xml": (GOOD.replace(' cnt="1"', "", 1), "missing attribute 'cnt'"),
    "badtype.xml": (GOOD.replace('type="s"', 'type="xx"', 1), "unknown type 'xx'"),
    "badcount.xml": (GOOD.replace('cnt="1"', 'cnt="99"', 1), "cnt=99"),
    "baddep.xml": (GOOD.replace('depid="-1" deps="-1"', 'depid="7" deps="0"', 1),
                   "threadblock 7"),
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("command", ["verify", "run"])
def test_bad_input_exit_2_one_line(tmp_path, capsys, name, command):
    text, needle = BAD[name]
    assert main([command, write(tmp_path, name, text)]) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), cap.err
    assert needle in lines[0]
    assert "Traceback" not in cap.err + cap.out


def test_broken_rule_is_invalid_exit_2(tmp_path, capsys):
    path = write(tmp_path, "oob.xml", GOOD.replace('srcoff="0"', 'srcoff="5"', 1))
    assert main(["verify", path]) == 2
    assert capsys.readouterr().out.startswith(
        "invalid: rank 0 tb 0 step 0: source i[5:6] is out of bounds")


def test_run_reference_correct(tmp_path, capsys):
    path = write(tmp_path, "ag.xml", GOOD)
    assert main(["run", path, "--bytes", "64KiB", "--dtype", "int32", "-w", "1", "--iters",
                 "3"]) == 0
    out = capsys.readouterr().out
    # no reduction op named: allgather does not reduce
    assert out.startswith("reference: allgather swap 64 KiB int32 out-of-place: correct, "
                          "median "), out
    assert "over 3 calls after 1 warm-up, algbw " in out and " busbw " in out


def test_run_timing_is_the_median_with_nccl_tests_bandwidths():
    from msccl_py.cli.sweep import Bench, timing_text

    def bench(collective, n):
        return Bench("x", collective, n, "float32", None, False, 4, 1, 1 << 40, None)
    # median of 0.1, 0.3 (an outlier) and 0.2 is 0.2 s: algbw 1e9/0.2 = 5 GB/s, busbw x 7/8
    line = timing_text(bench("allgather", 8), 10**9, [0.1, 0.3, 0.2], 2)
    assert line == ("median 200.000 ms over 3 calls after 2 warm-ups, algbw 5.00 GB/s, "
                    "busbw 4.38 GB/s")
    assert timing_text(bench("custom", 2), 10**9, [1.0], 0).endswith(
        "busbw n/a (custom collective)")


def test_run_names_the_op_of_a_reduction_and_no_numpy_reprs(tmp_path, capsys):
    alg = ring_allreduce(3)
    path = write(tmp_path, "ar.xml", write_xml(alg, "msccl"))
    assert main(["run", path, "--bytes", "36KiB", "--op", "max", "-n", "1", "-w", "0"]) == 0
    assert " float32 max in-place: correct" in capsys.readouterr().out
    alg.gpus[1].threadblocks[0].steps[1].op = "recv_copy_send"
    path = write(tmp_path, "bad.xml", write_xml(alg, "msccl"))
    assert main(["run", path, "--bytes", "36KiB"]) == 1
    out = capsys.readouterr().out
    assert "WRONG in call 1: rank" in out and "np." not in out


def test_run_refuses_bad_iteration_counts(tmp_path, capsys):
    path = write(tmp_path, "ag.xml", GOOD)
    assert main(["run", path, "--iters", "0"]) == 2
    assert "--iters must be at least 1" in capsys.readouterr().err


def test_run_wrong_result_exit_1(tmp_path, capsys):
    alg = ring_allreduce(3)
    alg.gpus[1].threadblocks[0].steps[1].op = "recv_copy_send"  # drops a contribution
    path = write(tmp_path, "bad.xml", write_xml(alg, "msccl"))
    assert main(["run", path, "--bytes", "36KiB"]) == 1
    assert "WRONG in call 1: rank" in capsys.readouterr().out


def test_run_deadlock_exit_1(capsys):
    path = DATA / "ring_allreduce_4x1_cnt2_simple.xml"
    assert main(["run", str(path), "--bytes", "64MiB"]) == 1
    assert "DEADLOCK" in capsys.readouterr().out


def test_backends(tmp_path, capsys):
    assert "reference" in BACKENDS and "shm" in BACKENDS
    assert get_backend("reference").__module__ == "msccl_py.runtime.reference"
    with pytest.raises(MscclRuntimeError, match="unknown backend 'gpu9'"):
        get_backend("gpu9")
    assert main(["run", write(tmp_path, "ag.xml", GOOD), "--backend", "gpu9"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@needs_corpus
@pytest.mark.parametrize("op,dtype", [
    ("sum", "float32"),
    # the other op/dtype pairs take the same path; they run with -m slow
    pytest.param("sum", "int32", marks=pytest.mark.slow),
    pytest.param("max", "float32", marks=pytest.mark.slow),
    pytest.param("max", "int32", marks=pytest.mark.slow),
])
def test_run_corpus_correct_files(capsys, dtype, op):
    from msccl_py.targets.msccl import read_xml

    from .test_corpus import _correct_files
    files = _correct_files()
    assert len(files) >= 30
    for path in files:
        size = read_xml(path).nchunksperloop * 4 * 2
        assert main(["run", str(path), "--bytes", str(size), "--dtype", dtype,
                     "--op", op, "-w", "0", "-n", "1"]) == 0, path.stem
        assert ": correct," in capsys.readouterr().out
