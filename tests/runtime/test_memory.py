"""Memory before work: a call that needs more than the machine has free is refused in one
line with both figures, before anything is allocated (``run`` and the communicator)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime import memory
from msccl_py.runtime.process_group import RankError


def test_available_bytes_reads_meminfo():
    free = memory.available_bytes()
    assert free is None or free > 0


def test_need_counts_buffers_and_staging():
    # 2 ranks, 3 input + 3 output + 1 scratch chunks of 10 float32
    assert memory.need_bytes([(3, 3, 1)] * 2, 10, 4) == 2 * 7 * 40
    assert memory.need_bytes([(3, 3, 1)] * 2, 10, 4, inplace=True) == 2 * 4 * 40
    assert memory.need_bytes([(3, 3, 1)] * 2, 10, 4, staged=True) == 2 * (7 + 9) * 40


def test_check_fits_gives_both_figures():
    memory.check_fits(1 << 20, "x", available=2 << 20)
    with pytest.raises(MscclRuntimeError) as err:
        memory.check_fits(3 << 30, "a call", available=512 << 20)
    assert str(err.value).startswith("a call needs about 3.0 GiB of memory and the machine "
                                     "has 512.0 MiB free (MemAvailable)")


def _all_reduce(comm):
    return comm.all_reduce(np.ones(1 << 20, dtype=np.float32))


def test_communicator_refuses_before_allocating(monkeypatch):
    import msccl_py
    # the ranks are forked: they see 8 MiB free, and 4 ranks x 1M float32 need more
    monkeypatch.setattr(memory, "available_bytes", lambda: 8 << 20)
    with pytest.raises(RankError) as err:
        msccl_py.launch(_all_reduce, 4)
    assert re.search(r"all_reduce of 1048576 float32 elements on 4 ranks needs about "
                     r"[\d.]+ MiB of memory and the machine has 8.0 MiB free", str(err.value))


def test_run_refuses_64gib_in_one_line(tmp_path, capsys):
    from msccl_py.cli import main
    xml = tmp_path / "ring.xml"
    assert main(["compile", "allreduce_ring", "--ranks", "4", "-o", str(xml)]) == 0
    capsys.readouterr()
    free = memory.available_bytes()
    if free is None:
        pytest.skip("no MemAvailable on this machine")
    for args in (["--bytes", "64GiB"], ["-b", "1MiB", "-e", "1TiB"]):
        assert main(["run", str(xml), *args]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1, err
        assert re.match(r"error: reference: allreduce \S+ at \d+ [GT]iB per rank needs about "
                        r"[\d.]+ GiB of memory and the machine has [\d.]+ [GM]iB free", err), err
