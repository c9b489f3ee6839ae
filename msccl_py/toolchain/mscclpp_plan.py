"""An MSCCL IR algorithm as an MSCCL++ plan: lowered, written, read back and verified.

The format's own code (:mod:`msccl_py.targets.mscclpp.emit`) lowers and
writes; the verdict comes from the verifier above it, so the service that
calls both lives here.
"""

from __future__ import annotations

from msccl_py import ir
from msccl_py.errors import VerificationError
from msccl_py.mscclpp_ir import Plan
from msccl_py.targets.mscclpp.emit import emit_text
from msccl_py.targets.mscclpp.read import read_plan_text
from msccl_py.verify.mscclpp.plan_check import verify_plan


def emit(alg: ir.Algorithm, gpus_per_node: int | None = None) -> tuple[Plan, str, str]:
    """The plan of ``alg`` as JSON text, read back and verified, with the verdict's summary.

    Raises VerificationError when the verdict is not ok.

    Verifying the text read back (not the plan built in memory) checks
    exactly what the executor will load.
    """
    text = emit_text(alg, gpus_per_node)
    plan = read_plan_text(text)
    verdict = verify_plan(plan)
    if not verdict.ok:
        first = f"; {verdict.findings[0].strip()}" if verdict.findings else ""
        why = (" (a custom collective becomes a sendrecv plan: each rank's output must be another "
               "rank's whole input)" if alg.collective == "custom" and verdict.status == "incorrect" else "")
        raise VerificationError(f"{alg.name}: the MSCCL++ plan is {verdict.status}: {verdict.summary}"
                                f"{first}{why}; not written")
    return plan, text, verdict.summary
