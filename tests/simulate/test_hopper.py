"""Hopper machine files: one threadblock cannot fill NVLink, so busbw grows with channels and
the tuner picks many channels (or another algorithm) for large calls."""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.simulate import machine_model, simulate
from msccl_py.topologies import available, load
from msccl_py.topologies.gpus import gpu_model
from msccl_py.tuning.tune import tune

# machine files only: the cluster files (rail-h100-*) copy dgx-h100 and cite it
HOPPER = [name for name in available()
          if (t := load(name)).num_machines == 1
          and (m := gpu_model(t.model)) is not None and m.arch >= 90]


def test_the_hopper_files_are_found():
    assert {"dgx-h100", "hgx-h200", "ndv5"} <= set(HOPPER)


@pytest.mark.parametrize("machine", HOPPER)
def test_every_hopper_file_cites_threadblock_figures(machine):
    m = machine_model(machine)
    assert m.threadblock_bw == 30.9
    assert (m.protocol("LL128").threadblock_bw, m.protocol("LL").threadblock_bw) == (39.1, 23.5)
    text = open(available()[machine]).read() if machine != "ndv5" else \
        open(available()["dgx-h100"]).read()
    for source in ("SM90_NVLINK_BW", "perChMaxRingLL128Bws", "llMaxBws", "nccl-tests"):
        assert source in text


@pytest.mark.parametrize("machine", HOPPER)
def test_ring_busbw_at_1GiB_grows_with_channels(machine):
    m = machine_model(machine)
    busbw = [simulate(library.compile("allreduce_ring", 8, channels=c), m, "1GiB")[0].busbw_GBps
             for c in (1, 2, 4, 8)]
    assert busbw == sorted(busbw) and busbw[-1] > 3 * busbw[0]
    assert busbw[0] == pytest.approx(30.9, rel=0.02)     # one channel: one threadblock


@pytest.mark.parametrize("machine", HOPPER)
def test_tune_picks_many_ring_channels_or_another_algorithm_for_large_calls(machine, tmp_path):
    result = tune("allreduce", machine, tmp_path / "out",
                  programs=["allreduce_ring", "nccl_ring", "allreduce_allpairs"],
                  sizes="256MiB,1GiB,4GiB", instances=(1,), channels=(1, 2, 4, 8),
                  cache_dir=tmp_path / "cache")
    for j, size in enumerate(result.sizes):
        if size < 256 << 20:
            continue
        best = min(range(len(result.candidates)), key=lambda k: result.times[k][j])
        alg = result.candidates[best].alg
        ring = result.candidates[best].label.startswith(("allreduce_ring", "nccl_ring"))
        assert not ring or alg.nchannels >= 8, (size, result.candidates[best].label)
