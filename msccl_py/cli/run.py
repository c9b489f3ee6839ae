"""``msccl-py run FILE.xml|PROGRAM.py [ARGS]``: run an algorithm on random data and check it.

Inputs are random integer-valued numbers (small enough that float sums and
products are exact), the result is compared with NumPy's
(:mod:`msccl_py.runtime.expected`) after every call, and the timing is
reported as nccl-tests does: ``-w`` untimed warm-up calls, then ``-n`` timed
calls, whose median time, algbw (size/time) and busbw (algbw times
nccl-tests' factor for the collective) are printed. Exit status 1 on a wrong
result. Put program options after ``--``.

Backends are looked up by name in the one registry
(:data:`msccl_py.plan.contract.BACKENDS`, through :mod:`msccl_py.runtime.backends`),
imported on use and called as ``fn(alg, inputs, op=..., inplace=...)``.

>>> from msccl_py.cli import main
>>> main(["run", "ring.xml", "--bytes", "1MiB"])   # doctest: +SKIP
reference: allreduce ring 1 MiB float32 sum in-place: correct, median 2.100 ms over 5 calls after 2 warm-ups, algbw 0.50 GB/s, busbw 0.87 GB/s
0
"""

from __future__ import annotations

from msccl_py.cli import add_command
from msccl_py.cli.backends import BACKENDS, get_backend

__all__ = ["BACKENDS", "get_backend", "register", "run"]


def register(subparsers) -> None:
    import argparse

    from msccl_py.cli import environment_help
    sub = add_command(subparsers, "run", epilog=environment_help(),
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.add_argument("file", metavar="FILE",
                     help="an MSCCL XML file, an MSCCL++ plan (.json) or an MSCCLang program (.py)")
    sub.add_argument("args", nargs="*", metavar="ARGS",
                     help="the program's arguments (after -- when they start with -)")
    sub.add_argument("--backend", default="reference",
                     help=f"runtime to use: {', '.join(BACKENDS)} (default reference)")
    sub.add_argument("--bytes", metavar="SIZE", default=None,
                     help="per-rank size as NCCL counts it (output for allgather, input for "
                          "reduce_scatter), e.g. 64MiB (default 1MiB)")
    sizes = sub.add_argument_group("size sweep, as nccl-tests spells it (prints its table)")
    sizes.add_argument("-b", "--minbytes", metavar="SIZE", default=None,
                       help="smallest size of the sweep")
    sizes.add_argument("-e", "--maxbytes", metavar="SIZE", default=None,
                       help="largest size of the sweep (default: -b)")
    sizes.add_argument("-f", "--stepfactor", type=float, default=None, metavar="F",
                       help="multiply the size by F each step (default 2)")
    sizes.add_argument("-i", "--stepbytes", metavar="SIZE", default=None,
                       help="add SIZE bytes each step instead")
    sub.add_argument("-d", "--dtype", default="float32",
                     help="element type (default float32; nccl-tests' names, e.g. float, half, "
                          "also work)")
    sub.add_argument("--op", default="sum", help="reduction: sum, prod, max, min, avg")
    sub.add_argument("-w", "--warmup", type=int, default=2,
                     help="untimed warm-up calls before the timed ones, per size (default 2)")
    sub.add_argument("-n", "--iters", type=int, default=5,
                     help="timed calls per size; the median is reported (default 5)")
    place = sub.add_mutually_exclusive_group()
    place.add_argument("--inplace", dest="inplace", action="store_const", const=True,
                       default=None, help="run the in-place call")
    place.add_argument("--outofplace", dest="inplace", action="store_const", const=False,
                       help="run the out-of-place call")
    sub.add_argument("--root", type=int, default=None,
                     help="root of a broadcast/reduce/gather/scatter (default: the XML's root "
                          "attribute, else 0)")
    sub.add_argument("--seed", type=int, default=0, help="random seed of the inputs")
    sub.add_argument("--placement", choices=("one-gpu", "devices", "host"), default=None,
                     help="cupy backend: all ranks on one GPU (default), rank r on device r, "
                          "or the host-driven fallback")
    sub.add_argument("--slice-elems", type=int, default=None,
                     help="reference backend: pipeline slice in elements per chunk")
    sub.set_defaults(func=run)


def run(args) -> int:
    # the calls, their checks and timing import NumPy and the sweep: only when run runs
    from msccl_py.cli.run_calls import run_command
    return run_command(args)
