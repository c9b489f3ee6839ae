#!/usr/bin/env python3
"""XML writer and reader speed: steps per second on a large compiled algorithm.

The ring allreduce of ``compile_scale.py``'s target case (128 ranks, 8
channels, 4 instances by default) is written as MSCCL XML and read back;
the rates are steps over the median wall time of ``--repeat`` runs::

    python benchmarks/xml_speed.py [--ranks 128] [--instances 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "programs"))

from allreduce_ring import allreduce_ring  # noqa: E402
from medians import median_seconds  # noqa: E402

from msccl_py.targets.msccl import read_xml, write_xml  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    prog = allreduce_ring(args.ranks, min(8, args.ranks), args.instances)
    prog.check_xml = False
    alg = read_xml(prog.generate_xml())
    steps = alg.num_steps()
    text = write_xml(alg, "msccl")
    write_s = median_seconds(lambda: write_xml(alg, "msccl"), args.repeat)
    read_s = median_seconds(lambda: read_xml(text), args.repeat)
    if read_xml(text) != alg:
        print("error: the XML read back differs from the algorithm written", file=sys.stderr)
        return 1
    print(f"{steps:,} steps, {len(text) / 1e6:.1f} MB of XML")
    print(f"write {write_s:.3f} s ({steps / write_s:,.0f} steps/s), "
          f"read {read_s:.3f} s ({steps / read_s:,.0f} steps/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
