"""``msccl-py calibrate``: fit a machine file's α and β to nccl-tests / rccl-tests logs."""

from __future__ import annotations

import argparse
from pathlib import Path

from msccl_py.cli import add_command


def register(subparsers) -> None:
    p = add_command(subparsers, "calibrate",
                    "Fit the ring link's bandwidth (beta) and per-hop latency (alpha) of a "
                    "machine file to nccl-tests / rccl-tests logs (text table or -Z csv) of "
                    "NCCL's ring, and write the calibrated machine file.")
    p.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests or rccl-tests output")
    p.add_argument("--topology", required=True, metavar="T",
                   help="machine the logs were measured on (name or .topo file)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.topo",
                   help="write the calibrated machine file here")
    p.add_argument("--proto", choices=("Simple", "LL128", "LL"), default=None,
                   help="NCCL_PROTO of logs that do not say it (default Simple)")
    p.add_argument("--algo", choices=("Ring", "Tree"), default=None,
                   help="NCCL_ALGO of logs that do not say it (default Ring)")
    p.add_argument("--collective", choices=("allreduce", "allgather", "reduce_scatter"),
                   default=None, help="collective of logs that do not say it")
    p.add_argument("--min-bytes", type=int, default=0, metavar="B",
                   help="fit only rows of at least B bytes (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from msccl_py.errors import LogError
    from msccl_py.tuning.calibrate import calibrated_text, fit_logs, fit_table
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
    print(fit_table(cal))
    print(f"\n{cal.topology.name}: {cal.kind} beta {cal.beta_GBps:.4g} GB/s per link, "
          f"alpha {cal.alpha_us:.4g} us per hop ({cal.share:g} link units carry the rings)")
    for fit in cal.protocols.values():
        print(f"  {fit.protocol}: busbw {fit.bus_GBps:.4g} GB/s, efficiency "
              f"{fit.efficiency:.3f}, alpha {fit.alpha_us:.4g} us, fixed {fit.base_us:.4g} us")
    for note in cal.notes:
        print(f"  note: {note}")
    out = Path(args.output)
    out.write_text(calibrated_text(cal, [Path(p).name for p in args.logs]))
    print(f"wrote {out}")
    return 0
