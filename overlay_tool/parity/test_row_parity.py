"""Every row of an M-row ``mx.quantized_matmul`` is bit-identical to the row alone.

Speculative decoding verifies k draft tokens with one M = k + 1 row product;
at temperature 0 each row must equal the M = 1 product byte for byte. This
sweeps M from 2 to the mat-vec batch limit (Metal: ``get_qmv_batch_limit`` of
the device; elsewhere up to 16), affine bits 2..8, group sizes 32/64/128,
float16/bfloat16/float32, aligned and ragged (K, N), and B in {1, 3} (B = 3
stacks a weight matrix per slab: the batched kernel variants). Results are
compared as bit patterns (``view`` as uint16/uint32), never with a tolerance.

Every test carries its own negative control: one input row is perturbed and
the same comparison must flag exactly that row, so a comparison that cannot
fail (wrong view, compared an array with itself, empty sweep) fails the test.
"""

from __future__ import annotations

import itertools
import zlib

import mlx.core as mx
import numpy as np
import pytest

from parity_lib import first_mismatch, m_values

BITS = [2, 3, 4, 5, 6, 8]
GROUP_SIZES = [32, 64, 128]
DTYPES = {"float16": (mx.float16, mx.uint16), "bfloat16": (mx.bfloat16, mx.uint16), "float32": (mx.float32, mx.uint32)}
# (K, N): aligned (qmv_fast on Metal: N % 8 == 0, K % 512 == 0), ragged N (N % 8 != 0: qmv with the N
# tail), ragged K (K % 512 and K % 256 != 0: qmv with the K tail).
SHAPES = [(512, 128), (384, 67), (640, 40)]
BATCHES = [1, 3]


def _bits(y: mx.array, uint) -> np.ndarray:
    return np.array(y.view(uint))


def _qmm(x, wq, scales, biases, gs, bits):
    return mx.quantized_matmul(x, wq, scales, biases, transpose=True, group_size=gs, bits=bits)


def _row(a: np.ndarray, m: int) -> np.ndarray:
    return a[..., m : m + 1, :]


def _rows_differing(batched: np.ndarray, singles: list[np.ndarray], M: int) -> list[int]:
    return [m for m in range(M) if first_mismatch(_row(batched, m), singles[m]) is not None]


@pytest.mark.parametrize("B", BATCHES, ids=lambda b: f"B{b}")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s[0]}xN{s[1]}")
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("gs", GROUP_SIZES, ids=lambda g: f"gs{g}")
@pytest.mark.parametrize("bits", BITS, ids=lambda b: f"{b}bit")
def test_rows_bitwise_equal_to_m1(backend, arch, bits, gs, dtype, shape, B):
    K, N = shape
    mx_dtype, uint = DTYPES[dtype]
    Ms = m_values(backend, K, N, arch)
    assert Ms and Ms[0] == 2, f"empty M sweep for {backend} {arch}"
    Mmax = Ms[-1]
    seed = zlib.crc32(f"{bits}-{gs}-{dtype}-{K}-{N}-{B}".encode())
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal((B, Mmax, K)).astype(np.float32)
    w_np = (rng.standard_normal((B, N, K)) / np.sqrt(K)).astype(np.float32)
    if B == 1:
        x_np, w_np = x_np[0], w_np[0]
    x = mx.array(x_np).astype(mx_dtype)
    w = mx.array(w_np).astype(mx_dtype)
    wq, scales, biases = mx.quantize(w, gs, bits)

    singles_mx = [_qmm(x[..., m : m + 1, :], wq, scales, biases, gs, bits) for m in range(Mmax)]
    mx.eval(singles_mx)
    singles = [_bits(s, uint) for s in singles_mx]

    failures = []
    for M in Ms:
        y = _bits(_qmm(x[..., :M, :], wq, scales, biases, gs, bits), uint)
        assert y.shape[-2:] == (M, N)
        for m in _rows_differing(y, singles, M):
            failures.append((M, m, first_mismatch(_row(y, m), singles[m])))
    assert not failures, (
        f"{len(failures)} rows differ from M=1 on {backend} (first: M={failures[0][0]}, "
        f"row {failures[0][1]}, element {failures[0][2]})"
    )

    # Negative control: perturb one row of the largest product; exactly that
    # row must be flagged by the same comparison.
    M = Mmax
    m0 = M // 2
    xp_np = x_np.copy()
    xp_np[..., m0, :] = xp_np[..., m0, :] * 1.5 + 0.25
    xp = mx.array(xp_np).astype(mx_dtype)
    yp = _bits(_qmm(xp[..., :M, :], wq, scales, biases, gs, bits), uint)
    assert _rows_differing(yp, singles, M) == [m0], "negative control: a perturbed row was not (only) flagged"


def test_sweep_covers_the_grid(backend, arch):
    """The sweep is what the docs say: M from 2 to >= the limit, every axis present."""
    for K, N in SHAPES:
        Ms = m_values(backend, K, N, arch)
        assert Ms[0] == 2 and len(Ms) >= (10 if backend == "metal" else 15)
    assert set(BITS) == {2, 3, 4, 5, 6, 8} and set(GROUP_SIZES) == {32, 64, 128}
    assert any(N % 8 for _, N in SHAPES) and BATCHES == [1, 3]
    assert len(list(itertools.product(BITS, GROUP_SIZES, DTYPES, SHAPES, BATCHES))) == 324
