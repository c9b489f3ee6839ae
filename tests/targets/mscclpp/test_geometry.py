"""The executor's size rule: a plan runs only at multiples of buffer_alignment x its chunks."""

from __future__ import annotations

import pytest

from msccl_py.errors import SizeError
from msccl_py.plan.mscclpp.geometry import geometry, message_quantum, runs_powers_of_two, size_rule
from msccl_py.mscclpp_ir import Gpu, Plan


def _plan(collective: str, ins: int, outs: int, ranks: int = 8, **kw) -> Plan:
    return Plan("p", collective, collective, "Simple", False, [Gpu(r, ins, outs, 0) for r in range(ranks)], **kw)


@pytest.mark.parametrize("collective,ins,outs,quantum", [
    ("allreduce", 56, 56, 896),          # 7 rings x 8 chunks of 16-byte units
    ("allreduce", 64, 64, 1024),
    ("allgather", 7, 56, 896),           # the input is the message / 8: 7 chunks of it need 8 x 112 B
    ("allgather", 1, 8, 128),
    ("reduce_scatter", 56, 7, 896),      # the output is the message / 8
    ("alltoall", 8, 8, 128),
])
def test_quantum_follows_both_buffers(collective, ins, outs, quantum):
    plan = _plan(collective, ins, outs)
    assert message_quantum(plan) == quantum
    geometry(plan, 3 * quantum)
    with pytest.raises(SizeError):
        geometry(plan, 3 * quantum + 16)


def test_powers_of_two_need_a_power_of_two_quantum_and_the_range():
    assert not runs_powers_of_two(_plan("allreduce", 56, 56))
    assert runs_powers_of_two(_plan("allreduce", 64, 64))
    assert not runs_powers_of_two(_plan("allreduce", 64, 64, max_message_size=1 << 19))
    assert size_rule(_plan("allreduce", 8, 8, min_message_size=4096)) == "multiples of 128 B from 4096 B"


def test_refused_size_names_the_rule_and_the_nearest_sizes():
    with pytest.raises(SizeError, match=r"1048576 bytes is not a size this plan runs at: the executor runs "
                                        r"it at multiples of 896 B \(56 chunks of 16-byte units\), e\.g\. "
                                        r"1048320 B or 1049216 B"):
        geometry(_plan("allreduce", 56, 56), 1 << 20)
