"""benchmarks/device_check.py: clean failure without CuPy, and a quick run on the fake CuPy."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import fake_cupy
from gpu_runtime_algos import needs_gxx

from msccl_py.runtime.cupy import device

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "device_check.py"


def load():
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_cupy_it_stops_with_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert load().main([str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("device_check: cannot run: CuPy is not installed")
    assert not (tmp_path / "out").exists()


@needs_gxx
def test_quick_run_on_fake_cupy_writes_every_record(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy.make())
    monkeypatch.setattr(device, "_kernels", {})
    out = tmp_path / "out"
    load().main([str(out), "--quick", "--budget", "200"])
    env = json.loads((out / "env.json").read_text())
    assert env["devices"][0]["multiProcessorCount"] == 132
    res = json.loads((out / "resources.json").read_text())
    f32 = res["nvrtc"]["msccl_interp_float32_sum_gpu"]
    assert f32["cooperative"] and f32["resident_blocks"]["512"] == 264
    recs = {r["case"]: r for r in map(json.loads, (out / "correctness.jsonl").open())}
    for case in ("ring8 float32 sum", "ring8 bfloat16 avg", "ring8 int32 prod",
                 "ring8 misaligned S", "ring8x4 LL128", "ring8 host fallback",
                 "oversubscribed grid error", "watchdog deadlock", "usable after deadlock"):
        assert recs[case]["status"] == "pass", recs[case]
    assert "deadlock" in recs["watchdog deadlock"]["note"]
    assert "plan needs 2400 co-resident blocks" in recs["oversubscribed grid error"]["note"]
    assert all(r["status"] != "fail" for r in recs.values()), [
        r for r in recs.values() if r["status"] == "fail"]
    summary = (out / "summary.txt").read_text()
    assert "correctness:" in summary and " 0 fail" in summary
    assert (out / "log.txt").read_text().count("PASS") >= 30
    assert (out / "bandwidth.csv").read_text().startswith("kind,config")
