"""Weight traffic of qmv_streamed, counted on the emulator (tests/kernel/traffic.py).

qmv_streamed must read each weight byte once per tile, not once per vector:
every lane loads each packed byte of its rows exactly once per tile (loads
summed over lanes == distinct bytes), and the tiles together read the matrix
ceil(M / 5) times where qmv reads it M times.
"""

from __future__ import annotations

import pytest

from overlay_tool.emulator import wide_vecs_per_tg
from tests.kernel.traffic import CountingEmulator, case

K, N, GS, DTYPE = 512, 16, 64, "float32"


@pytest.fixture(scope="module")
def counting(patched_header):
    return CountingEmulator(patched_header)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
def test_weight_bytes_per_tile(counting, bits):
    matrix = N * K * bits // 8
    for m in (3, 7, 16):
        kw = case(bits, GS, DTYPE, K, N, m)
        tiles = -(-m // wide_vecs_per_tg(m))
        qmv = counting.count("qmv_m1", **kw)
        st = counting.count("qmv_streamed", **kw)
        wide = counting.count("qmv_wide", **kw)
        assert qmv.weight_bytes == m * matrix
        assert wide.weight_bytes == tiles * matrix
        assert st.weight_bytes == tiles * matrix
        # Read once per lane, row and K block, and reused for every vector.
        assert st.weight_load_bytes == st.weight_bytes
        # Scales and biases: once per tile too.
        assert st.sb_bytes == tiles * qmv.sb_bytes // m
