"""Verify an MSCCL XML file written by another tool, at two message sizes.

The verifier executes the XML with the runtimes' semantics. Whether an
algorithm deadlocks depends on the message size: a FIFO connection holds a
fixed number of transfers, and a step moving c chunks is one transfer when
chunks are small but up to c transfers when they are large. So we verify at a
small and at a large size and explain the difference.

By default this reads ``ns3-msccl-data__ar_allpair_simple_x_1.xml`` (an 8-rank
all-pairs allreduce from the ns3-msccl project) from the shared corpus in
``<repo>/../shared/corpus/xml/``. Without that directory it writes an
equivalent file itself: an all-pairs allreduce in which every rank first
sends all its chunks at once. Pass another path to verify your own file:

    python examples/verify_foreign_xml.py [FILE.xml]
"""

import sys
import tempfile
from pathlib import Path

from msccl_py import MscclError, ir
from msccl_py.plan.geometry import geometry
from msccl_py.plan.sizes import format_size
from msccl_py.verify import safe_max_bytes, verify
from msccl_py.targets.msccl import read_xml, summary, write_xml

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / ".." / "shared" / "corpus" / "xml"
CORPUS_FILE = CORPUS / "ns3-msccl-data__ar_allpair_simple_x_1.xml"


def eager_allpairs_allreduce(n: int, c: int = 4) -> ir.Algorithm:
    """All-pairs allreduce whose sends all come first: fine for small messages only.

    Rank r owns block r (chunks r*c .. r*c+c-1). Its threadblock for peer p
    sends block p to p's scratch, receives p's copy of block r into its own
    scratch, then (after the reducer has summed every copy into block r) sends
    the finished block r to p and receives the finished block p. Both ends of
    every pair send first, which is safe only while a c-chunk send fits in
    the FIFO.
    """
    gpus = []
    for r in range(n):
        peers = [p for p in range(n) if p != r]
        reducer_id = len(peers)
        tbs = []
        for t, p in enumerate(peers):
            there = [q for q in range(n) if q != p].index(r)   # p's threadblock for r
            tbs.append(ir.Threadblock(t, send_peer=p, recv_peer=p, channel=0, steps=[
                ir.Step("send", ir.Loc("i", p * c), ir.Loc("s", there * c), count=c),
                ir.Step("recv", ir.Loc("i", r * c), ir.Loc("s", t * c), count=c,
                        has_dependents=True),
                ir.Step("send", ir.Loc("i", r * c), ir.Loc("i", r * c), count=c,
                        depends=[(reducer_id, len(peers) - 1)]),
                ir.Step("recv", ir.Loc("i", p * c), ir.Loc("i", p * c), count=c),
            ]))
        reducer = [ir.Step("reduce", ir.Loc("s", t * c), ir.Loc("i", r * c), count=c,
                           depends=[(t, 1)], has_dependents=(t == len(peers) - 1))
                   for t in range(len(peers))]
        tbs.append(ir.Threadblock(reducer_id, channel=0, steps=reducer))
        gpus.append(ir.Gpu(r, n * c, 0, len(peers) * c, tbs))
    return ir.Algorithm("eager_allpairs", "allreduce", "Simple", True, n, n * c, 1, gpus,
                        outofplace=False)


if len(sys.argv) > 1:
    path = Path(sys.argv[1])
elif CORPUS_FILE.is_file():
    path = CORPUS_FILE.resolve()
else:
    path = None

if path is None:
    # the written file lives in a temporary folder, named here and removed once read
    with tempfile.TemporaryDirectory(prefix="msccl_py-example-") as tmp:
        path = Path(tmp) / "eager_allpairs.xml"
        path.write_text(write_xml(eager_allpairs_allreduce(4), "msccl"))
        print(f"(no ../shared corpus here; wrote {path} to verify instead; it is removed "
              f"once read)")
        alg = read_xml(path)
else:
    try:
        alg = read_xml(path)    # same reader for anyone's XML; errors name the line
    except MscclError as exc:
        sys.exit(f"error: {exc}")
print(f"file: {path.name}")
print(summary(alg))
print()

# Two call sizes (bytes per rank, as NCCL counts them). A step of c chunks is one
# transfer while c chunks fit in one pipeline iteration's slot, else several.
g = geometry(alg.protocol)
for nbytes in (64 << 10, 64 << 20):
    v = verify(alg, nbytes=nbytes)
    print(f"--- {format_size(nbytes)} per rank")
    print(v.report())
print()

# Both regimes at once, and what the verifier concludes for the XML's size range.
verdict = verify(alg)
print(f"all sizes in the XML's range: {verdict}")
if verdict.status == "deadlock":
    limit = safe_max_bytes(alg, verdict)
    print(f"why: with small messages each step is a single transfer and every FIFO has room "
          f"({g.fifo_transfers} transfers of {format_size(g.iter_bytes)}), so all the "
          f"up-front sends complete. With large messages each send becomes several transfers; "
          f"two ranks that both send first fill each other's FIFO and wait forever.")
    print(f"safe: up to {format_size(limit)} per rank (safe_max_bytes); writing "
          f"maxBytes=\"{limit}\" into the XML keeps the runtimes from selecting it above that.")
    alg.max_bytes = limit
    print(f"with maxBytes={limit}: {verify(alg)}")
elif verdict.ok:
    print("why: every FIFO has room for what is sent before the matching receive runs, at "
          "both sizes.")
