"""``msccl-py calibrate``: fit a machine file to nccl-tests / rccl-tests logs, through the simulator."""

from __future__ import annotations

import argparse
from pathlib import Path

from msccl_py.cli import add_command


def register(subparsers) -> None:
    p = add_command(subparsers, "calibrate")
    p.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests or rccl-tests output")
    p.add_argument("--topology", required=True, metavar="T",
                   help="machine the logs were measured on (name or .topo file)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.topo",
                   help="write the calibrated machine file here")
    p.add_argument("--proto", choices=("Simple", "LL128", "LL"), default=None,
                   help="NCCL_PROTO of logs that do not say it (default: NCCL's own choice "
                        "per size)")
    p.add_argument("--algo", choices=("Ring", "Tree"), default=None,
                   help="NCCL_ALGO of logs that do not say it (default Ring)")
    p.add_argument("--collective", choices=("allreduce", "allgather", "reduce_scatter"),
                   default=None, help="collective of logs that do not say it")
    p.add_argument("--min-bytes", type=int, default=0, metavar="B",
                   help="fit only rows of at least B bytes (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from msccl_py.errors import LogError, MscclError
    from msccl_py.tuning.calibrate import calibrated_text, describe, fit_logs, fit_table, round_trip
    from msccl_py.tuning.logs import read_log

    logs = []
    for path in args.logs:
        log = read_log(path)
        log.collective = log.collective or args.collective
        log.rows = [row for row in log.rows if row.size >= args.min_bytes]
        if not log.rows:
            raise LogError(f"no rows of at least {args.min_bytes} bytes", path)
        logs.append(log)
    cal = fit_logs(logs, args.topology, args.proto, args.algo)
    out = Path(args.output)
    try:
        out.write_text(calibrated_text(cal, [Path(p).name for p in args.logs]))
    except OSError as exc:
        raise MscclError(f"cannot write {out}: {exc.strerror}") from None
    round_trip(cal, logs, out)
    print(fit_table(cal))
    print(f"\n{cal.topology.name}, calibrated:")
    for line in describe(cal):
        print(f"  {line}")
    worst = {k: max((abs(r.error) for r in cal.rows if (r.size >= 65536) == k), default=0.0)
             for k in (True, False)}
    print(f"  residual: at most {worst[True]:.1%} at 64 KiB and up, {worst[False]:.1%} below "
          f"(simulated on {out} as {_runner(logs)} runs each size)")
    print(f"wrote {out}")
    return 0


def _runner(logs) -> str:
    """Who ran the logs: RCCL runs some sizes as MSCCL's all-pairs (see calibrate.round_trip)."""
    return "RCCL" if any(log.library == "RCCL" for log in logs) else "NCCL"

