"""One prepared check of the CuPy GPU runtime on a lent GPU machine (about 8 minutes).

    python3 -u benchmarks/device_check.py OUTDIR [--budget SECONDS] [--quick]

Writes, flushing every record as it goes (a run cut short keeps its results):

* ``log.txt``          everything printed (the log is teed)
* ``env.json``         GPU, CuPy/CUDA versions, SMs, L2, memory, peer access
* ``resources.json``   nvcc and NVRTC builds: compile time, registers, local
                       bytes, occupancy at 128/256/512 threads, cooperative or not
* ``correctness.jsonl`` one record per case: corpus files, the ring at every
                       dtype x op, one/many/ragged iterations, misaligned
                       chunks, host fallback, negative cases (oversubscribed
                       grid, watchdog deadlock then a good call), racecheck
* ``bandwidth.csv``    device copy baselines and ring allreduce sweeps:
                       t, algbw, busbw, 16N/t, 44N/t and 16N/t as a fraction
                       of the device copy traffic (read + write) at that size
* ``summary.txt``      the one-screen summary printed last

Needs CuPy, NumPy, lxml (networkx for the library); on a machine without
CuPy it stops at once with a one-line message. Corpus files are looked up in
``../shared/corpus/xml`` and ``shared/corpus/xml`` next to the repository.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from msccl_py.errors import MscclDeadlockError, MscclError
from msccl_py.runtime.cupy import calls, nvcc_gate, samples
from msccl_py.runtime.cupy.kernel_source import entry_name

MiB = 1 << 20
CORPUS_FIRST = ("ns3-msccl__allreduce_ring_8_1.xml", "rccl-unittest__all-reduce-ring-simple.xml",
                "rccl-unittest__all-reduce-ring-ll.xml", "rccl-unittest__all-reduce-ring-ll128.xml",
                "rccl__allreduce-allpairs-8n-simple.xml", "rccl__alltoall-8n-9kb-190kb.xml",
                "msccl-scheduler__ndv4__ag-1m.xml")
SIZES_MIB = (1, 4, 16, 64, 256, 1024)


class Run:
    """Output directory, tee'd log, flushed records and the time budget."""

    def __init__(self, outdir: Path, budget: float, quick: bool):
        self.out = outdir
        self.out.mkdir(parents=True, exist_ok=True)
        # the three files stay open for the whole run (see close())
        self.log = open(self.out / "log.txt", "a", buffering=1)  # noqa: SIM115
        self.t0 = time.monotonic()
        self.budget = budget
        self.quick = quick
        self.results = {"pass": 0, "fail": 0, "skip": 0}
        self.best = None
        self.corr = open(self.out / "correctness.jsonl", "a", buffering=1)  # noqa: SIM115
        self.bw_file = open(self.out / "bandwidth.csv", "a", buffering=1,  # noqa: SIM115
                            newline="")
        self.bw = csv.writer(self.bw_file)
        if self.bw_file.tell() == 0:
            self.bw.writerow(["kind", "config", "bytes_per_rank", "t_s", "algbw_GBps",
                              "busbw_GBps", "bw16N_GBps", "bw44N_GBps", "frac_of_copy"])

    def close(self) -> None:
        for f in (self.log, self.corr, self.bw_file):
            f.close()

    def say(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(f"[{self.elapsed():6.1f}s] {line}", flush=True)
        self.log.write(f"[{self.elapsed():6.1f}s] {line}\n")

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self, until: float) -> bool:
        """True while the run is inside ``until`` seconds (capped by the whole budget)."""
        return self.elapsed() < min(until, self.budget)

    def write_json(self, name: str, data) -> None:
        with open(self.out / name, "w") as f:
            json.dump(data, f, indent=1, default=str)

    def record(self, case: str, status: str, **fields) -> None:
        self.results[status] = self.results.get(status, 0) + 1
        rec = {"case": case, "status": status, "t": round(self.elapsed(), 2), **fields}
        self.corr.write(json.dumps(rec, default=str) + "\n")
        self.say(f"{status.upper():4s} {case}", fields.get("error", "") or
                 fields.get("note", ""))

    def bandwidth(self, kind: str, config: str, nbytes: int, t: float, nranks: int = 8,
                  copy_traffic: float | None = None) -> None:
        if nranks == 1:   # a copy: bytes/t, and its traffic (read + write) 2 bytes/t
            self.bw.writerow([kind, config, nbytes, f"{t:.6g}", f"{nbytes / t / 1e9:.2f}", "",
                              "", "", ""])
            self.bw_file.flush()
            self.say(f"bw {kind} {config} {nbytes // MiB} MiB: {t * 1e3:.3f} ms, "
                     f"{nbytes / t / 1e9:.0f} GB/s copied ({2 * nbytes / t / 1e9:.0f} GB/s "
                     "of traffic)")
            return
        algbw = nbytes / t
        busbw = algbw * 2 * (nranks - 1) / nranks
        bw16, bw44 = 16 * nbytes / t, 44 * nbytes / t
        frac = bw16 / copy_traffic if copy_traffic else ""
        if frac != "" and kind == "ring" and (self.best is None or frac > self.best[0]):
            self.best = (frac, config, nbytes)
        self.bw.writerow([kind, config, nbytes, f"{t:.6g}", f"{algbw / 1e9:.2f}",
                          f"{busbw / 1e9:.2f}", f"{bw16 / 1e9:.1f}", f"{bw44 / 1e9:.1f}",
                          f"{frac:.3f}" if frac != "" else ""])
        self.bw_file.flush()
        self.say(f"bw {kind} {config} {nbytes // MiB} MiB: {t * 1e3:.3f} ms, "
                 f"busbw {busbw / 1e9:.1f} GB/s, 16N/t {bw16 / 1e9:.0f} GB/s"
                 + (f" = {frac:.1%} of copy" if frac != "" else ""))


def section_env(run: Run, cp) -> dict:
    rt = cp.cuda.runtime
    ndev = rt.getDeviceCount()
    devs = []
    for d in range(ndev):
        p = rt.getDeviceProperties(d)
        devs.append({k: (v.decode() if isinstance(v, bytes) else v) for k, v in p.items()
                     if k in ("name", "multiProcessorCount", "l2CacheSize", "totalGlobalMem",
                              "major", "minor", "clockRate", "memoryClockRate",
                              "memoryBusWidth", "sharedMemPerMultiprocessor",
                              "regsPerMultiprocessor", "cooperativeLaunch")})
    peers = [[bool(rt.deviceCanAccessPeer(a, b)) if a != b else True for b in range(ndev)]
             for a in range(ndev)]
    env = {"python": sys.version, "platform": platform.platform(), "numpy": np.__version__,
           "cupy": cp.__version__, "cuda_runtime": rt.runtimeGetVersion(),
           "cuda_driver": rt.driverGetVersion(), "devices": devs, "peer_access": peers,
           "nvcc": nvcc_gate.nvcc(), "compute_sanitizer": shutil.which("compute-sanitizer")}
    run.write_json("env.json", env)
    run.say(f"env: {ndev} x {devs[0].get('name')} ({devs[0].get('multiProcessorCount')} SMs), "
            f"CuPy {cp.__version__}, CUDA runtime {env['cuda_runtime']}")
    return env


def section_build(run: Run, cp) -> dict:
    from msccl_py.runtime.cupy import device
    res: dict = {"nvcc": None, "nvrtc": {}}
    if nvcc_gate.nvcc() and run.left(70) and not run.quick:
        try:
            built, secs = nvcc_gate.build()
            res["nvcc"] = {"seconds": secs, "entries": {k: vars(v) for k, v in built.items()},
                           "all_clean": all(v.clean for v in built.values())}
            run.say(f"nvcc: {len(built)} entries in {secs:.1f} s, all clean: "
                    f"{res['nvcc']['all_clean']}")
        except MscclError as exc:
            res["nvcc"] = {"error": str(exc)}
            run.say("nvcc build failed:", str(exc).splitlines()[0])
    for dtype, op in (("float32", "sum"), ("bfloat16", "sum"), ("float16", "max"),
                      ("int32", "prod"), ("float64", "min"), ("uint8", "sum")):
        if not run.left(90):
            break
        name = entry_name(dtype, op, "gpu")
        try:
            k = device.kernel(dtype, op, "gpu")
            occ = {t: device.device_blocks(k, t) for t in device.THREAD_CHOICES}
            res["nvrtc"][name] = {"seconds": k.build_s, "cooperative": k.cooperative,
                                  "cooperative_error": k.note, **k.attributes(),
                                  "resident_blocks": occ}
            run.say(f"nvrtc {name}: {k.build_s:.1f} s, {k.attributes()['registers']} regs, "
                    f"local {k.attributes()['local_bytes']} B, coop {k.cooperative}, "
                    f"resident {occ}")
        except MscclError as exc:
            res["nvrtc"][name] = {"error": str(exc)}
            run.say(f"nvrtc {name} failed: {exc}")
    run.write_json("resources.json", res)
    return res


def find_corpus() -> Path | None:
    for cand in (REPO / ".." / "shared" / "corpus" / "xml", REPO / "shared" / "corpus" / "xml"):
        if cand.is_dir():
            return cand.resolve()
    return None


def int_inputs(alg, chunk_elems: int, dtype: str, op: str, seed: int = 0) -> list:
    from msccl_py.plan.tables import plan_for
    cc = plan_for(alg).call_chunks
    rng = np.random.default_rng(seed)
    lo, hi = {"prod": (1, 3), "max": (0, 100), "min": (0, 100)}.get(op, (0, 8))
    out = []
    for r in range(alg.ngpus):
        x = rng.integers(lo, hi, int(cc[r, 0]) * chunk_elems).astype(np.float32)
        out.append(calls.to_bf16_bits(x) if dtype == "bfloat16" else x.astype(dtype))
    return out


def oracle(alg, ins, op: str, dtype: str, slice_elems=None):
    """NumPy-expected outputs (None entries unspecified); reference.run for odd collectives."""
    from msccl_py.runtime import reference
    from msccl_py.runtime.expected import expected
    vals = [calls.from_bf16_bits(x) for x in ins] if dtype == "bfloat16" else ins
    try:
        want = expected(alg, vals, op)
    except MscclError:
        want = reference.run(alg, vals, op, slice_elems=slice_elems)
    if dtype == "bfloat16":
        want = [None if w is None else calls.to_bf16_bits(w) for w in want]
    return want


def check_case(run: Run, case: str, alg, chunk_elems: int, dtype="float32", op="sum",
               placement="one-gpu", slice_elems=None, **kw) -> None:
    from msccl_py.runtime.cupy import backend
    try:
        ins = int_inputs(alg, chunk_elems, dtype, op)
        t0 = time.perf_counter()
        out = backend.run(alg, ins, op, placement=placement, dtype=dtype,
                          slice_elems=slice_elems, **kw)
        dt = time.perf_counter() - t0
        want = oracle(alg, ins, op, dtype, slice_elems)
        bad = [r for r, (o, w) in enumerate(zip(out, want)) if w is not None and not
               np.array_equal(o, w, equal_nan=np.asarray(o).dtype.kind == "f")]
        fields = {"alg": alg.name, "dtype": dtype, "op": op, "S": chunk_elems,
                  "placement": placement, "seconds": round(dt, 4)}
        if bad:
            r = bad[0]
            idx = int(np.flatnonzero(np.asarray(out[r]) != np.asarray(want[r]))[0])
            run.record(case, "fail", error=f"rank {r} element {idx}: {out[r][idx]!r} != "
                       f"{want[r][idx]!r} ({len(bad)} ranks wrong)", **fields)
        else:
            run.record(case, "pass", **fields)
    except MscclError as exc:
        run.record(case, "fail", error=f"{type(exc).__name__}: {exc}", alg=alg.name)
    except Exception as exc:  # noqa: BLE001 - a CuPy/CUDA error must not stop the check
        run.record(case, "fail", error=f"{type(exc).__name__}: {exc}",
                   trace=traceback.format_exc()[-1500:])


def section_correctness(run: Run, cp) -> None:
    from msccl_py.targets.msccl import read_xml
    until = 250 if not run.quick else 60
    ring = samples.ring_allreduce(8)
    # dtypes x ops on the ring, one iteration and many iterations with a ragged tail
    for dtype in ("float32", "float16", "bfloat16", "int32", "float64"):
        for op in ("sum", "prod", "max", "min", "avg"):
            if run.left(until):
                check_case(run, f"ring8 {dtype} {op}", ring, 64, dtype, op)
    for label, s, sl in (("one iteration", 4096, None), ("ragged iterations", 1000, 96),
                         ("misaligned S", 1001, 128), ("NCCL slices, 3 iterations", 1_300_000,
                                                        None)):
        if run.left(until) and not (run.quick and s > 10_000):
            check_case(run, f"ring8 {label}", ring, s, "float32", "sum", slice_elems=sl)
    for proto in ("LL", "LL128"):
        if run.left(until):
            check_case(run, f"ring8x4 {proto}", samples.ring_allreduce(8, proto, 4), 3000)
    corpus = find_corpus()
    if corpus is None:
        run.record("corpus", "skip", note="no corpus directory next to the repository")
    else:
        first = CORPUS_FIRST if not run.quick else CORPUS_FIRST[:1] + CORPUS_FIRST[-1:]
        files = [corpus / f for f in first if (corpus / f).exists()]
        if not run.quick:
            files += [p for p in sorted(corpus.glob("*.xml")) if p not in files]
        for path in files:
            if not run.left(until):
                break
            try:
                alg = read_xml(path)
            except MscclError as exc:
                run.record(f"corpus {path.name}", "skip", note=str(exc))
                continue
            check_case(run, f"corpus {path.name}", alg, 256, slice_elems=None)
            if path.name in CORPUS_FIRST and run.left(until):
                check_case(run, f"corpus {path.name} host fallback", alg, 256,
                           placement="host")
    try:
        from msccl_py import library
        names = library.names()
    except Exception as exc:  # noqa: BLE001 - library optional on the GPU machine
        names = []
        run.record("library", "skip", note=f"library unavailable: {exc}")
    for name in names[:3] if run.quick else names:
        if not run.left(until):
            break
        try:
            alg = library.compile(name, num_ranks=8)
        except Exception as exc:  # noqa: BLE001
            run.record(f"library {name}", "skip", note=str(exc).splitlines()[0])
            continue
        check_case(run, f"library {name}", alg, 512)
    for label, fn in (("host fallback ring8", lambda: check_case(
            run, "ring8 host fallback", ring, 5000, placement="host")),
            ("devices placement", lambda: section_devices(run, cp))):
        if run.left(until + 20):
            fn()
    negative_cases(run, cp)


def section_devices(run: Run, cp) -> None:
    n = cp.cuda.runtime.getDeviceCount()
    if n < 2:
        run.record("devices placement", "skip", note=f"{n} GPU: needs 2 or more")
        return
    k = min(n, 8)
    check_case(run, f"devices placement ring{k}", samples.ring_allreduce(k, channels=2), 4096,
               placement="devices")


def negative_cases(run: Run, cp) -> None:
    from msccl_py.runtime.cupy import backend
    from msccl_py.targets.msccl import read_xml
    big = samples.many_blocks(2400)   # more than 132 SMs x 16 blocks of 128 threads
    try:
        backend.run(big, int_inputs(big, 16, "float32", "sum"))
        run.record("oversubscribed grid error", "fail", error="ran without an error")
    except MscclError as exc:
        ok = "co-resident blocks" in str(exc)
        run.record("oversubscribed grid error", "pass" if ok else "fail", note=str(exc))
    alg = read_xml(samples.fifo_deadlock_xml())
    t0 = time.perf_counter()
    try:
        backend.run(alg, int_inputs(alg, 1 << 20, "float32", "sum"), watchdog=1.0)
        run.record("watchdog deadlock", "fail", error="no deadlock reported")
    except MscclDeadlockError as exc:
        run.record("watchdog deadlock", "pass", note=str(exc),
                   seconds=round(time.perf_counter() - t0, 2))
    except Exception as exc:  # noqa: BLE001
        run.record("watchdog deadlock", "fail", error=f"{type(exc).__name__}: {exc}")
    check_case(run, "usable after deadlock", alg, 64, watchdog=1.0)
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer and run.left(run.budget - 120):
        cmd = [sanitizer, "--tool", "racecheck", sys.executable, str(Path(__file__).resolve()),
               "--racecheck-child"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
            tail = (res.stdout + res.stderr)[-1500:]
            ok = res.returncode == 0 and "RACECHECK SUMMARY: 0 hazards" in tail
            run.record("compute-sanitizer racecheck", "pass" if ok else "fail", note=tail)
        except subprocess.TimeoutExpired:
            run.record("compute-sanitizer racecheck", "skip", note="over 30 s")
    else:
        run.record("compute-sanitizer racecheck", "skip", note="compute-sanitizer absent")


def racecheck_child() -> int:
    from msccl_py.runtime.cupy import backend
    ring = samples.ring_allreduce(4)
    out = backend.run(ring, int_inputs(ring, 256, "float32", "sum"), threads=128)
    print("racecheck child ran", len(out), "ranks")
    return 0


COPY_SRC = r"""
extern "C" __global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                  long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] = __ldcg(src + i);
}
extern "C" __global__ void sum8(const float4* const* src, float4* const* dst, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float4 a = src[0][i];
    for (int k = 1; k < 8; k++) {
      float4 b = src[k][i];
      a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
    }
    for (int k = 0; k < 8; k++) dst[k][i] = a;
  }
}
"""


def timed(cp, fn, reps: int = 10, warmup: int = 3) -> float:
    """Best time (s) of ``fn`` enqueued on the current stream, measured with events."""
    best = float("inf")
    for i in range(warmup + reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        if i >= warmup:
            best = min(best, cp.cuda.get_elapsed_time(a, b) / 1e3)
    return best


def section_bandwidth(run: Run, cp) -> None:
    from msccl_py.runtime.cupy import backend
    sizes = SIZES_MIB if not run.quick else (1,)
    reps = 10 if not run.quick else 1
    mod = cp.RawModule(code=COPY_SRC)
    copy16, sum8 = mod.get_function("copy16"), mod.get_function("sum8")
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    copy_traffic = {}
    for mib in sizes:
        if not run.left(run.budget - 60):
            return
        n = mib * MiB
        src, dst = cp.ones(n // 4, cp.float32), cp.empty(n // 4, cp.float32)
        t = timed(cp, lambda dst=dst, src=src: cp.copyto(dst, src), reps)
        copy_traffic[mib] = 2 * n / t
        run.bandwidth("copy", "cupy.copyto", n, t, 1)
        ins = [cp.ones(n // 4, cp.float32) for _ in range(8)]
        outs = [cp.empty(n // 4, cp.float32) for _ in range(8)]
        sp = cp.asarray(np.array([a.data.ptr for a in ins], dtype=np.uint64))
        dp = cp.asarray(np.array([a.data.ptr for a in outs], dtype=np.uint64))
        t = timed(cp, lambda sp=sp, dp=dp, n=n: sum8((sms * 4,), (512,),
                                                     (sp, dp, np.int64(n // 16))), reps)
        run.bandwidth("ideal", "8-in/8-out sum", n, t, 8, copy_traffic[mib])
        del ins, outs, src, dst
    if run.left(run.budget - 60):
        n = (256 if not run.quick else 1) * MiB
        src, dst = cp.ones(n // 4, cp.float32), cp.empty(n // 4, cp.float32)
        for blocks in (1, 8, 32, 132, 264):
            t = timed(cp, lambda b=blocks: copy16((b,), (512,), (src, dst, np.int64(n // 16))),
                      reps)
            run.bandwidth("copy_blocks", f"{blocks} blocks x 512", n, t, 1)
        del src, dst
    configs = [(k, bs, thr) for k in (16, 4, 1) for bs in (None, 8 * 64 * 1024)
               for thr in (512, 256)]
    warmup = 3
    if run.quick:
        configs, warmup = configs[:2], 1
    for k, bs, thr in configs:
        alg = samples.ring_allreduce(8, channels=k)
        label = f"ring8 x{k} {'NCCL' if bs is None else '64KiB'} slots T={thr}"
        full = (k == 16 and thr == 512)
        for mib in (sizes if full else (256 if not run.quick else 1,)):
            if not run.left(run.budget - 45):
                return
            try:
                rt = backend.runtime(alg, "one-gpu", buffsize=bs, watchdog=10.0, threads=thr,
                                     devices=None)
                n = mib * MiB
                t = rt.time_call(n // 4 // alg.nchunksperloop, reps=reps, warmup=warmup)
                run.bandwidth("ring", label, n, t, 8, copy_traffic.get(mib))
            except Exception as exc:  # noqa: BLE001
                run.say(f"bw {label} {mib} MiB failed: {type(exc).__name__}: {exc}")
        cp.get_default_memory_pool().free_all_blocks()
    for dtype, mib in (("bfloat16", 256),):
        if run.left(run.budget - 30) and not run.quick:
            alg = samples.ring_allreduce(8, channels=16)
            rt = backend.runtime(alg, "one-gpu", buffsize=8 * 64 * 1024, watchdog=10.0,
                                 threads=512, devices=None)
            n = mib * MiB
            t = rt.time_call(n // 2 // alg.nchunksperloop, dtype=dtype, reps=reps)
            run.bandwidth("ring", "ring8 x16 64KiB slots bf16", n, t, 8, copy_traffic.get(mib))
    for mib in ((1, 16, 256) if not run.quick else (1,)):
        if not run.left(run.budget - 15):
            return
        alg = samples.ring_allreduce(8, channels=4)
        n = mib * MiB
        ins = [cp.ones(n // 4, cp.float32) for _ in range(8)]
        t0 = time.perf_counter()
        backend.run(alg, ins, placement="host", as_cupy=True)
        cp.cuda.runtime.deviceSynchronize()
        run.bandwidth("host_fallback", "ring8 x4 (incl. copies)", n, time.perf_counter() - t0,
                      8, copy_traffic.get(mib))


def summary(run: Run) -> str:
    r = run.results
    lines = ["=" * 72, f"device_check finished in {run.elapsed():.0f} s",
             (f"correctness: {r.get('pass', 0)} pass, {r.get('fail', 0)} fail, "
              f"{r.get('skip', 0)} skipped  (correctness.jsonl)")]
    fails = []
    with open(run.out / "correctness.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            if rec["status"] == "fail":
                fails.append(f"  FAIL {rec['case']}: {str(rec.get('error', ''))[:110]}")
    lines += fails[:12]
    if run.best:
        frac, cfg, nbytes = run.best
        lines.append(f"best ring 16N/t: {frac:.1%} of device copy traffic ({cfg}, "
                     f"{nbytes // MiB} MiB/rank; target >= 40% at 256 MiB)")
    else:
        lines.append("no ring bandwidth measured")
    lines.append("=" * 72)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?", type=Path)
    ap.add_argument("--budget", type=float, default=450.0, help="seconds for the whole run")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test of the script)")
    ap.add_argument("--racecheck-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from msccl_py.runtime.cupy import device
    reason = device.unavailable_reason()
    if reason is not None:
        print(f"device_check: cannot run: {reason}", file=sys.stderr)
        return 2
    import cupy as cp
    if args.racecheck_child:
        return racecheck_child()
    if args.outdir is None:
        ap.error("OUTDIR is required")
    run = Run(args.outdir, args.budget, args.quick)
    run.say(f"device_check in {args.outdir}, budget {args.budget:.0f} s")
    for name, fn in (("env", section_env), ("build", section_build),
                     ("correctness", section_correctness), ("bandwidth", section_bandwidth)):
        try:
            fn(run, cp)
        except Exception as exc:  # noqa: BLE001 - keep going: later sections still report
            run.say(f"section {name} crashed: {type(exc).__name__}: {exc}")
            run.log.write(traceback.format_exc())
    text = summary(run)
    (run.out / "summary.txt").write_text(text + "\n")
    run.say("\n" + text)
    run.close()
    return 0 if run.results.get("fail", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
