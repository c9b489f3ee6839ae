"""Export verified algorithms for the MSCCL runtimes, with safe size ranges.

The MSCCL runtimes pick an algorithm per call by collective, rank count,
in-place/out-of-place and message size: a call of ``nbytes`` may use an XML
only when ``minBytes <= nbytes <= maxBytes``. This script builds an
allreduce algorithm directory for 8 GPUs:

* ``allreduce_allpairs`` (LL) for small messages and ``allreduce_ring``
  (Simple) for the rest, with disjoint ranges so exactly one matches;
* every XML verified first; one that deadlocks above some size gets
  ``maxBytes`` = the largest safe size (``msccl_py.verify.safe_max_bytes``),
  one that is wrong is left out;
* when ``<repo>/../shared/corpus/xml`` is present, an 8-rank all-pairs
  allreduce written by another tool (ns3-msccl) is checked to show such a
  bound; pass more XML files on the command line to add your own. A
  candidate whose range overlaps one already exported is reported, not
  written: narrow its range first.

One directory per runtime dialect (the dialects differ in spelling and
limits: ``msccl_py.targets.msccl.dialects``), plus the environment each runtime reads:
``MSCCL_XML_FILES`` (microsoft/msccl) or ``MSCCL_ALGO_DIR``
(msccl-executor-nccl, RCCL).

Run: ``python examples/export_for_nccl.py [OUT_DIR] [EXTRA.xml ...]``
"""

import shlex
import sys
import tempfile
from pathlib import Path

from msccl_py import MscclError, library
from msccl_py.plan.sizes import format_size
from msccl_py.verify import safe_max_bytes, verify
from msccl_py.targets.msccl import check_limits, read_xml, write_xml

RANKS = 8
REPO = Path(__file__).resolve().parents[1]
FOREIGN = REPO / ".." / "shared" / "corpus" / "xml" / "ns3-msccl-data__ar_allpair_simple_x_1.xml"

out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "msccl-export"
extra = [Path(p) for p in sys.argv[2:]]
if FOREIGN.is_file():
    extra.insert(0, FOREIGN.resolve())

# (label, algorithm) candidates. Library programs get the size window their
# spec declares (msccl-py list shows it), made disjoint: the ring starts above
# the all-pairs window.
candidates = []
small = library.get("allreduce_allpairs")
alg = library.compile("allreduce_allpairs", RANKS, protocol="LL")
alg.min_bytes, alg.max_bytes = small.min_bytes, small.max_bytes
candidates.append(("library allreduce_allpairs", alg))
alg = library.compile("allreduce_ring", RANKS, protocol="Simple")
alg.min_bytes, alg.max_bytes = small.max_bytes + 1, 0            # 0: no upper bound
candidates.append(("library allreduce_ring", alg))
for path in extra:
    candidates.append((f"file {path.name}", read_xml(path)))



def overlaps(a, b) -> bool:
    """Whether one call could match both algorithms (same shape, intersecting sizes)."""
    if (a.collective, a.ngpus) != (b.collective, b.ngpus):
        return False
    if not ((a.inplace and b.inplace) or (a.outofplace and b.outofplace)):
        return False
    a_hi, b_hi = a.max_bytes or float("inf"), b.max_bytes or float("inf")
    return a.min_bytes <= b_hi and b.min_bytes <= a_hi


print(f"verifying {len(candidates)} candidate algorithms:")
kept = []
for label, alg in candidates:
    verdict = verify(alg)
    if verdict.status == "deadlock":
        try:
            limit = safe_max_bytes(alg, verdict)
        except MscclError as exc:       # deadlocks at every size
            print(f"  {label}: dropped, {exc}")
            continue
        if limit is not None:
            alg.max_bytes = limit if not alg.max_bytes else min(alg.max_bytes, limit)
            print(f"  {label}: deadlocks with large messages; maxBytes set to "
                  f"{alg.max_bytes} ({format_size(alg.max_bytes)})")
        verdict = verify(alg)           # now the large regime is outside its range
    if not verdict.ok:
        print(f"  {label}: dropped, {verdict}")
        continue
    high = "unbounded" if not alg.max_bytes else format_size(alg.max_bytes)
    clash = next((other for other, o in kept if overlaps(alg, o)), None)
    if clash:   # two matching XMLs: which one a runtime takes is up to its scheduler
        print(f"  {label}: ok for {format_size(alg.min_bytes)} .. {high}, but not exported: "
              f"that range overlaps {clash}'s")
        continue
    print(f"  {label}: ok for {format_size(alg.min_bytes)} .. {high} per rank")
    kept.append((label, alg))

ENV = {
    "msccl": lambda d, files: {"NCCL_ALGO": "MSCCL,RING,TREE",
                               "MSCCL_XML_FILES": ":".join(str(f) for f in files)},
    "msccl-executor": lambda d, files: {"NCCL_MSCCL_ENABLE": "1", "MSCCL_ALGO_DIR": str(d)},
    "rccl": lambda d, files: {"RCCL_MSCCL_ENABLE": "1", "MSCCL_ALGO_DIR": str(d)},
}
RUNTIME = {"msccl": "microsoft/msccl (NCCL 2.12 based)",
           "msccl-executor": "Azure/msccl-executor-nccl (with its scheduler)",
           "rccl": "ROCm/rccl"}

for target, env_of in ENV.items():
    directory = out_dir / target
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for label, alg in kept:
        try:
            check_limits(alg, target)   # e.g. RCCL allows 64 threadblocks per GPU
        except MscclError as exc:
            print(f"{target}: skipping {label}: {exc}")
            continue
        path = directory / f"{alg.name}.{alg.protocol}.xml"
        path.write_text(write_xml(alg, target))
        files.append(path)
    env = env_of(directory, files)
    env_file = directory / "msccl.env"
    env_file.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))
    print(f"\n{RUNTIME[target]}: {len(files)} XML files in {directory}")
    for f in files:
        head = read_xml(f)
        high = "unbounded" if not head.max_bytes else str(head.max_bytes)
        print(f"  {f.name:<44} minBytes={head.min_bytes} maxBytes={high}")
    print(f"  environment ({env_file.name}):")
    for k, v in env.items():
        print(f"    export {k}={shlex.quote(v)}")
