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

import sys

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
    from msccl_py.targets.msccl.names import algo_attributes, check_names
    if args.target is not None:
        get_dialect(args.target)
    nbytes = parse_size(args.bytes) if args.bytes else None
    buffsize = parse_size(args.buffsize) if args.buffsize else None
    itemsize = dtype_of(args.dtype).itemsize
    data = read_bytes(args.file)
    for note in check_names(data, args.file):
        print(note, file=sys.stderr)
    alg = read_xml(data, file=args.file)       # the bytes read above, not a second read
    args.target = _loading_target(args, alg, algo_attributes(data))
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


def read_bytes(path: str) -> bytes:
    """The file's bytes, or none when it cannot be read (the reader says why)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _loading_target(args, alg, attributes: set[str]) -> str:
    """The target to verify for: ``--target``, refused when that runtime would not load the
    file; by default the default dialect, or the first that runs the collective and loads
    the file when that one would not (said in a note)."""
    from msccl_py.errors import XmlError
    from msccl_py.targets.msccl.dialects import DIALECTS, default_target
    from msccl_py.targets.msccl.names import not_loaded_by
    if args.target is not None:
        reason = not_loaded_by(attributes, args.target)
        if reason:
            raise XmlError(f"not ok for --target {args.target}: {reason}", line=1,
                           file=args.file)
        return args.target
    target = default_target(alg.collective)
    reason = not_loaded_by(attributes, target)
    if reason is None:
        return target
    for name, dialect in DIALECTS.items():
        if alg.collective in dialect.collectives and not_loaded_by(attributes, name) is None:
            print(f"note: verified for --target {name}: {reason}", file=sys.stderr)
            return name
    raise XmlError(f"no runtime loads this file: {reason}", line=1, file=args.file)
