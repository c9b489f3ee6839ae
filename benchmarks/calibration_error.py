"""How well `calibrate` fits and transfers, on every published one-node log.

For every one-node log in tests/data/nccl_tests/ (and any --logs DIR) whose
manifest names a machine this checkout has:

* round trip: `calibrate LOG --topology T -o OUT.topo`, then `simulate nccl
  --topology OUT.topo --gpus-per-process G` (G from the log's header) at the
  log's sizes, against its out-of-place times;
* transfer: the file fitted on one log predicting every other log of the same
  GPU model (another launch, another system), each with its own G;
* with --joint, also one fit on all logs of a GPU model together, predicting
  each of them.

Prints per pair the median and worst |error| at >= 64 KiB and below, and
whether both are within issue 33's bounds (15% from 64 KiB, 30% below). A pair
that misses at rows the log itself contradicts (its in-place time of the same
size differs from the out-of-place one by over 10%, or the next size's time
is too close for the log's best bandwidth: Log.time_ranges) also gives the
errors against the nearest time the log allows there. --rows prints every
size: bytes, protocol, algorithm, channels, measured (out of place, in place),
predicted, error, and "noise" for such rows. A fit the calibration refuses
prints its reason.

With --mean-fit the fits stop before the refinement that brings every row
within its bound where physical parameters allow (calibrate --mean-fit).
With --slowed N it instead makes N logs from the published ones (each in
turn, seeds 0..N-1), with two random rows' out-of-place times 15-40% slower,
and prints per log whether the round trip is within with the mean fit and
with the refinement: how the refinement fares on rows no log here has.

    python benchmarks/calibration_error.py [--logs DIR ...] [--only SUBSTR] [--rows] [--joint]
                                           [--mean-fit] [--slowed N]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import sys
import tempfile
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from msccl_py.errors import MscclError  # noqa: E402
from msccl_py.topologies import load  # noqa: E402
from msccl_py.topologies.gpus import gpu_model  # noqa: E402
from msccl_py.tuning import calibrate_nccl as cn  # noqa: E402
from msccl_py.tuning.logs import read_log  # noqa: E402

import model_error  # noqa: E402  (the manifest reader and machine picker)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOUNDS = (0.15, 0.30)


def _cell(stat) -> str:
    return f"{stat[0] * 100:6.1f}% / {stat[1] * 100:5.1f}%" if stat else f"{'-':>16}"


def _ok(stats: dict) -> bool:
    return all(stats[k] is None or stats[k][1] <= b for k, b in zip(("big", "small"), BOUNDS))


def _within(rows) -> str:
    """within, MISS, or MISS with the worst once the rows the log contradicts are left out."""
    if _ok(cn.error_stats(rows)):
        return "within"
    quiet = cn.error_stats(rows, settled=True)
    if not any(r.noisy for r in rows):
        return "MISS"
    return (f"MISS; {'within' if _ok(quiet) else 'still MISS'} against the times the log "
            f"allows at its {sum(r.noisy for r in rows)} noisy row(s): "
            f"{_cell(quiet['big']).strip()}, {_cell(quiet['small']).strip()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", nargs="*", default=[], help="more directories of logs")
    ap.add_argument("--only", help="fit only logs whose name contains this")
    ap.add_argument("--rows", action="store_true", help="print every size's error")
    ap.add_argument("--joint", action="store_true",
                    help="also fit all logs of one GPU model together")
    ap.add_argument("--mean-fit", action="store_true",
                    help="no refinement towards every row within its bound")
    ap.add_argument("--slowed", type=int, metavar="N",
                    help="round trips of N logs with two rows made 15-40%% slower")
    args = ap.parse_args()
    dirs = [os.path.join(HERE, "tests", "data", "nccl_tests")] + args.logs
    seen: dict[str, str] = {}
    for d in dirs:
        model_error.read_manifest(d)
        for f in sorted(os.listdir(d)):
            if f.endswith(".txt"):
                seen.setdefault(f, os.path.join(d, f))
    logs = []                                   # (name, machine, gpu model, Log)
    for name, path in sorted(seen.items()):
        machines, nodes = model_error.MACHINES.get(name, ((), 1))
        machine = model_error.machine_for(name, nodes) if nodes == 1 else None
        if machine is None:
            continue
        model = load(machine).model
        known = gpu_model(model)                # H100-SXM5 and H100-SXM5-80GB are one GPU
        logs.append((name, machine, known.name if known else model, read_log(path)))
    if args.slowed:
        return _slowed(logs, args.slowed)
    print(f"{'fitted on':<42} {'predicting':<42} {'-g':>4}  {'>=64KiB med / worst':>16}  "
          f"{'<64KiB med / worst':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, machine, model, log in logs:
            if args.only and args.only not in name:
                continue
            t0 = time.perf_counter()
            try:
                fit = cn.fit_nccl([log], machine, strict=not args.mean_fit)
            except MscclError as exc:
                print(f"{name:<42} {'(refused)':<42} {log.gpus_per_process or 1:>4}  "
                      f"{exc.message}")
                continue
            out = os.path.join(tmp, f"{name}.topo")
            with open(out, "w") as f:
                f.write(cn.calibrated_text(fit, [name]))
            secs = time.perf_counter() - t0
            for other, _, omodel, olog in logs:
                if omodel != model:
                    continue
                rows = (cn.round_trip(fit, [log], out) if other == name else
                        cn.predict(cn.NcclFit(load(out), out, 1.0, {}), [olog]))
                stats = cn.error_stats(rows)
                label = "(round trip)" if other == name else other
                print(f"{name:<42} {label:<42} {olog.gpus_per_process or 1:>4}  "
                      f"{_cell(stats['big']):>16}  {_cell(stats['small']):>16}  "
                      f"{_within(rows)}")
                if args.rows:
                    for r, row in zip(rows, olog.timed_rows()):
                        ip = f"{row.in_place_us:9.2f}" if row.in_place_us else f"{'-':>9}"
                        print(f"    {r.size:>12} {r.protocol:<6} {r.program:<8} x{r.channels:<3}"
                              f"{r.measured_us:9.2f} {ip} {r.model_us:9.2f} "
                              f"{r.error * 100:+7.1f}%" + (f"  noise: the log allows "
                              f"{r.measured_range[0]:.2f}-{r.measured_range[1]:.2f}"
                              if r.noisy else ""))
            print(f"{'':<42} ({', '.join(cn.describe(fit)[:6])}; fit {secs:.0f} s)")
        if args.joint:
            _joint(logs, tmp, not args.mean_fit)
    return 0


def _slowed(logs: list, n: int) -> int:
    """Round trips of ``n`` logs with two random rows slowed 15-40%, mean fit and refined."""
    fits = [(name, machine, log) for name, machine, _, log in logs]
    counts, tried = [0, 0], 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(n):
            rnd = random.Random(seed)
            name, machine, log = fits[seed % len(fits)]
            log = copy.deepcopy(log)
            for _ in range(2):
                row = rnd.choice(log.timed_rows())
                k = log.rows.index(row)
                log.rows[k] = replace(row, time_us=row.time_us * rnd.uniform(1.15, 1.4))
            got = []
            for strict in (False, True):
                try:
                    fit = cn.fit_nccl([log], machine, strict=strict)
                except MscclError:
                    break
                out = os.path.join(tmp, "slowed.topo")
                with open(out, "w") as f:
                    f.write(cn.calibrated_text(fit, [name]))
                got.append(_ok(cn.error_stats(cn.round_trip(fit, [log], out))))
            if len(got) < 2:
                print(f"seed {seed:<3} {name:<42} (refused)")
                continue
            tried += 1
            counts = [c + g for c, g in zip(counts, got)]
            print(f"seed {seed:<3} {name:<42} mean fit {'within' if got[0] else 'MISS':<7}"
                  f"refined {'within' if got[1] else 'MISS'}")
    print(f"within: {counts[0]} of {tried} with the mean fit, {counts[1]} refined")
    return 0


def _joint(logs: list, tmp: str, strict: bool) -> None:
    """One fit on every log of a GPU model (several), predicting each."""
    for model in sorted({m for _, _, m, _ in logs}):
        group = [(name, machine, log) for name, machine, m, log in logs if m == model]
        if len(group) < 2:
            continue
        label = f"all {len(group)} {model} logs"
        try:
            fit = cn.fit_nccl([log for _, _, log in group], group[0][1], strict=strict)
        except MscclError as exc:
            print(f"{label:<42} {'(refused)':<42} {'':>4}  {exc.message}")
            continue
        out = os.path.join(tmp, "joint.topo")
        with open(out, "w") as f:
            f.write(cn.calibrated_text(fit, [name for name, _, _ in group]))
        for name, _, log in group:
            rows = cn.round_trip(fit, [log], out)
            stats = cn.error_stats(rows)
            print(f"{label:<42} {name:<42} {log.gpus_per_process or 1:>4}  "
                  f"{_cell(stats['big']):>16}  {_cell(stats['small']):>16}  {_within(rows)}")
        print(f"{'':<42} ({', '.join(cn.describe(fit)[:8])})")


if __name__ == "__main__":
    sys.exit(main())
