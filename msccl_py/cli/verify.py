"""``msccl-py verify FILE.xml``: the verifier's verdict on an MSCCL XML file.

Prints the verdict line (``ok``, ``incorrect``, ``deadlock`` or ``invalid``
with its reason) and one line per message-size regime. Exit status: 0
correct, 1 incorrect or deadlock, 2 unusable input (unreadable XML or a
broken runtime rule).

>>> from msccl_py.cli import main
>>> main(["verify", "ring.xml", "--bytes", "1MiB"])   # doctest: +SKIP
ok: allreduce postcondition holds (in-place); deadlock-free with large messages
  large messages (1 iteration, ...): deadlock-free
0
"""

from __future__ import annotations

from msccl_py.cli import add_command, check_input

EXIT = {"ok": 0, "incorrect": 1, "deadlock": 1, "invalid": 2}


def register(subparsers) -> None:
    sub = add_command(subparsers, "verify", bounded=True)
    sub.add_argument("file", metavar="FILE.xml", help="the MSCCL XML algorithm")
    sub.add_argument("--bytes", metavar="SIZE",
                     help="verify one call size (per rank, as NCCL counts it; e.g. 64MiB) "
                          "instead of both size regimes")
    sub.add_argument("--dtype", default="float32",
                     help="element type the size is counted in (default float32)")
    sub.add_argument("--target", default=None,
                     help="runtime dialect whose rules and limits apply (msccl, "
                          "msccl-executor, rccl; default msccl-executor, or msccl for a "
                          "custom collective, which only it runs)")
    sub.add_argument("--root", type=int, default=None,
                     help="root rank of a broadcast/reduce/gather/scatter (default: the XML's "
                          "root attribute, else 0)")
    sub.add_argument("--buffsize", metavar="SIZE",
                     help="FIFO buffer size per connection (default: NCCL's for the protocol)")
    sub.set_defaults(func=run)


def run(args) -> int:
    if not _starts_with_tag(args.file):
        from msccl_py.targets.mscclpp.read import is_plan_file
        if is_plan_file(args.file):      # an MSCCL++ JSON plan, told apart by content
            from msccl_py.cli.plans import verify_command
            return verify_command(args)
    check_input(args.file, "verify")
    from msccl_py.plan.contract import dtype_of
    from msccl_py.plan.sizes import parse_size
    from msccl_py.verify import verify
    from msccl_py.targets.msccl import read_xml
    from msccl_py.targets.msccl.dialects import get_dialect
    if args.target is not None:
        get_dialect(args.target)
    nbytes = parse_size(args.bytes) if args.bytes else None
    buffsize = parse_size(args.buffsize) if args.buffsize else None
    itemsize = dtype_of(args.dtype).itemsize
    alg = read_xml(args.file)
    if args.target is None:
        from msccl_py.targets.msccl.dialects import default_target
        args.target = default_target(alg.collective)
    verdict = verify(alg, target=args.target, root=args.root, nbytes=nbytes,
                     itemsize=itemsize, buffsize=buffsize)
    print(verdict.report())
    return EXIT[verdict.status]


def _starts_with_tag(path: str) -> bool:
    """True when the file's first character (after a BOM and blanks) is ``<``: XML, surely no
    JSON plan, so the plan reader need not even be imported."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"<"
