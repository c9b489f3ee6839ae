"""``msccl-py calibrate``: fit a machine file to nccl-tests / rccl-tests logs, through the simulator."""

from __future__ import annotations

import argparse
from pathlib import Path

from msccl_py.cli import add_command


def register(subparsers) -> None:
    p = add_command(subparsers, "calibrate")
    p.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests or rccl-tests output")
    p.add_argument("--topology", required=True, metavar="T",
                   help="machine the logs were measured on (name or .topo file; one node: "
                        "logs of K nodes are fitted on K copies)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.topo",
                   help="write the calibrated machine file here")
    p.add_argument("--proto", choices=("Simple", "LL128", "LL"), default=None,
                   help="NCCL_PROTO of logs that do not say it (default: NCCL's own choice "
                        "per size)")
    p.add_argument("--algo", choices=("Ring", "Tree"), default=None,
                   help="NCCL_ALGO of logs that do not say it (default: NCCL's own choice per "
                        "size, NVLS included, as `simulate nccl` predicts it; Ring fits ring "
                        "runs through the event model)")
    p.add_argument("--collective", choices=("allreduce", "allgather", "reduce_scatter"),
                   default=None, help="collective of logs that do not say it")
    p.add_argument("--gpus-per-process", type=int, default=None, metavar="N",
                   help="GPUs one process drives (nccl-tests -g N) for logs whose header does "
                        "not say it (nGpus N); default 1")
    p.add_argument("--min-bytes", type=int, default=0, metavar="B",
                   help="fit only rows of at least B bytes (default: all above 0)")
    p.add_argument("--mean-fit", action="store_true",
                   help="keep the fit that rows the log contradicts do not drag, even where "
                        "it leaves a row outside 15%% (from 64 KiB; 30%% below) of its "
                        "out-of-place time (default: refine it so every row is within, where "
                        "physical parameters allow)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from msccl_py.errors import LogError, MscclError
    from msccl_py.tuning.logs import read_log

    if args.gpus_per_process is not None and args.gpus_per_process < 1:
        raise MscclError(f"--gpus-per-process must be at least 1, got {args.gpus_per_process}")
    logs = []
    for path in args.logs:
        log = read_log(path)
        log.collective = log.collective or args.collective
        log.rows = [row for row in log.rows if row.size >= args.min_bytes]
        if not log.rows:
            raise LogError(f"no rows of at least {args.min_bytes} bytes", path)
        logs.append(log)
    ring = args.algo is not None or any(log.algo for log in logs)
    fit, rows, lines = (_ring if ring else _nccl)(args, logs)
    from msccl_py.tuning.calibrate import fit_table
    print(fit_table(rows))
    print(f"\n{fit.topology.name}, calibrated:")
    for line in lines:
        print(f"  {line}")
    from msccl_py.tuning.calibrate_nccl import error_stats
    worst = _worst(error_stats(rows))
    runner = "RCCL" if any(log.library == "RCCL" for log in logs) else "NCCL"
    how = (f"as {runner} runs each size with NCCL_ALGO=Ring" if ring else
           f"with `simulate nccl`, as {runner} chooses each size")
    print(f"  residual: at most {worst[True]:.1%} at 64 KiB and up, {worst[False]:.1%} below "
          f"(simulated on {args.output} {how})")
    noisy = sum(r.noisy for r in rows)
    if noisy:
        settled = _worst(error_stats(rows, settled=True))
        print(f"  against the times the logs allow at their {noisy} noisy row(s) (in place and "
              f"out of place far apart, or the next size too close): at most "
              f"{settled[True]:.1%} and {settled[False]:.1%}")
    if not ring and len(logs) > 1:
        _cross_validation(args, logs)
    print(f"wrote {args.output}")
    return 0


def _worst(stats: dict) -> dict[bool, float]:
    """Worst |error| from 64 KiB (True) and below (False) of ``error_stats``' figures (0
    where no row)."""
    return {k: stats[name][1] if stats[name] else 0.0 for k, name in ((True, "big"),
                                                                       (False, "small"))}


def _write(args, text: str) -> None:
    from msccl_py.errors import MscclError
    out = Path(args.output)
    try:
        out.write_text(text)
    except OSError as exc:
        raise MscclError(f"cannot write {out}: {exc.strerror}") from None


def _ring(args, logs):
    """NCCL_ALGO=Ring logs: the ring fit through the event model (tuning.calibrate)."""
    from msccl_py.tuning.calibrate import calibrated_text, describe, fit_logs, round_trip
    cal = fit_logs(logs, args.topology, args.proto, args.algo)
    _write(args, calibrated_text(cal, [Path(p).name for p in args.logs]))
    return cal, round_trip(cal, logs, args.output), describe(cal)


def _nccl(args, logs):
    """NCCL's own choice per size (tuning.calibrate_nccl)."""
    from msccl_py.tuning import calibrate_nccl as cn
    for log in logs:
        log.proto = log.proto or args.proto
    fit = cn.fit_nccl(logs, args.topology, args.gpus_per_process, strict=not args.mean_fit)
    _write(args, cn.calibrated_text(fit, [Path(p).name for p in args.logs]))
    return fit, cn.round_trip(fit, logs, args.output, args.gpus_per_process), cn.describe(fit)


def _cross_validation(args, logs) -> None:
    """Fit on each log alone and print the error on every other."""
    from msccl_py.tuning.calibrate_nccl import cross_validate

    def pct(pair):
        return "-" if pair is None else f"{pair[0]:.1%} / {pair[1]:.1%}"
    print("\ncross-validation (fit on one log, predict another; median / worst |error|):")
    print(f"  {'fitted on':<28} {'predicted':<28} {'>= 64 KiB':>17} {'< 64 KiB':>17}")
    for fitted, other, stats in cross_validate(logs, args.topology, args.gpus_per_process,
                                                 not args.mean_fit):
        if "refused" in stats:
            print(f"  {Path(fitted).name[:28]:<28} refused: {stats['refused']}")
            continue
        print(f"  {Path(fitted).name[:28]:<28} {Path(other).name[:28]:<28} "
              f"{pct(stats['big']):>17} {pct(stats['small']):>17}")
