"""calcCollChunking's pieces (src/enqueue.cc, NCCL 2.30), worked by hand."""

from __future__ import annotations

from msccl_py.tuning.nccl_chunks import nvls_chunk, tree_chunk


def test_nvls_pieces_are_enqueue_cc_chunks():
    """calcCollChunking: NVLS pieces of NCCL_NVLS_CHUNKSIZE (128 KiB) are cut to 64 / 32 /
    16 KiB while the call is under 64 / 8 / 2 x (channels x heads) pieces; NVLSTree's to
    64 / 32 KiB under 4 / 1 x."""
    ops = 16 * 8
    assert nvls_chunk("NVLS", 1 << 30, 16, 8) == 128 << 10          # 1 GiB = 64 x 128 x 128K
    assert nvls_chunk("NVLS", (1 << 30) - 1, 16, 8) == 64 << 10
    assert nvls_chunk("NVLS", 8 * ops * (64 << 10) - 1, 16, 8) == 32 << 10
    assert nvls_chunk("NVLS", 1 << 20, 16, 8) == 16 << 10
    assert nvls_chunk("NVLSTree", 64 << 20, 16, 8) == 128 << 10     # = 4 x 128 x 128K
    assert nvls_chunk("NVLSTree", 32 << 20, 16, 8) == 64 << 10
    assert nvls_chunk("NVLSTree", 4 << 20, 16, 8) == 32 << 10


def test_tree_pieces_are_enqueue_cc_chunks():
    """One buffer step per piece: LL 512 KiB / 8 halved (its flags), Simple 4 MiB / 8;
    LL128 4,915,200 B / 8 steps, of which 15 words in 16 are data (576,000 B), halved
    while a channel gets fewer than nstepsLL128 x 64 / ppn pieces (to 128 KiB and no
    further), then x 16 / ppn (to 32 KiB): nstepsLL128 = 1 + log2(2) + 0.8 = 2.8 on two
    nodes of 8 GPUs, so 22.4 and 5.6 pieces."""
    assert tree_chunk("LL", 1 << 20, 16, 2, 8) == 32768
    assert tree_chunk("Simple", 1 << 20, 16, 2, 8) == 524288
    assert tree_chunk("LL128", 1 << 34, 16, 2, 8) == 576000
    # 4 MiB on 16 channels: 576000 -> 288000 -> 144000 -> 72000 (first loop stops at
    # 128 KiB), then 4 MiB / (16 x 72000) = 3 < 5.6 -> 36000 (7 pieces)
    assert tree_chunk("LL128", 4 << 20, 16, 2, 8) == 36000
    assert tree_chunk("LL128", 1 << 10, 16, 2, 8) == 18000   # halved to the first at most 32 KiB
