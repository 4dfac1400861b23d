"""Weight traffic of fp_qmv_streamed, counted on the emulator (tests/kernel/fp_traffic.py).

fp_qmv_streamed must read each weight byte once per tile, not once per
vector: every lane loads each packed word of its rows exactly once per tile
(loads summed over lanes == distinct bytes), and the tiles together read the
matrix ceil(M / 5) times where fp_qmv (the M = 1 kernel, and the stock route
of nvfp4 with a global scale) reads it M times; stock fp_qmv_wide also reads
it ceil(M / 5) times.
"""

from __future__ import annotations

import pytest

from overlay_tool.emulator import fpquant, wide_vecs_per_tg

from .fp_traffic import VARIANTS, CountingFpEmulator, case

DTYPE = "float32"
SHAPES = [(512, 16), (416, 13)]  # (K, N): fp_qmv_fast, and fp_qmv with ragged K and N


@pytest.fixture(scope="module")
def counting(patched_fp_header):
    return CountingFpEmulator(patched_fp_header)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s[0]}xN{s[1]}")
@pytest.mark.parametrize("variant", VARIANTS, ids=["mxfp4", "nvfp4", "nvfp4_gs", "mxfp8"])
def test_fp_weight_bytes_per_tile(counting, variant, shape):
    mode, g = variant
    K, N = shape
    matrix = N * K * fpquant.mode_of(mode).bits // 8
    for m in (3, 7, 16):
        kw = case(mode, DTYPE, K, N, m, g)
        tiles = -(-m // wide_vecs_per_tg(m))
        qmv = counting.count("qmv_m1", **kw)
        st = counting.count("qmv_streamed", **kw)
        # Both read every row the M = 1 kernel reads (a moved back last tile
        # re-reads some rows in both), the streamed kernel once per tile.
        per_vector = qmv.weight_bytes // m
        assert qmv.weight_bytes == m * per_vector and per_vector >= matrix
        assert st.weight_bytes == tiles * per_vector
        if N % 8 == 0:
            assert per_vector == matrix
        if not g:
            wide = counting.count("qmv_wide", **kw)
            assert wide.weight_bytes == tiles * matrix
        # Read once per lane, row and K block, and reused for every vector:
        # every simdgroup loads its 4 rows' words once per tile (with a moved
        # back last tile, two simdgroups load some rows each), so with whole
        # tiles each byte is loaded exactly once. (The stock M = 1 kernel's
        # source reads each 16-bit word once per element it decodes: -O0
        # counts those loads 4 times, a compiler keeps one.)
        rows_loaded = -(-N // 8) * 8
        assert st.weight_load_bytes == tiles * rows_loaded * K * fpquant.mode_of(mode).bits // 8
        if N % 8 == 0:
            assert st.weight_load_bytes == st.weight_bytes
        # Scales (and the global scale): once per tile too.
        assert st.sb_bytes == tiles * (qmv.sb_bytes // m)
