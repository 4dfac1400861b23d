"""The fp modes: every row of an M-row fp product is bit-identical to the row alone.

The same contract as ``test_row_parity.py`` for ``mode="mxfp4"``, ``"nvfp4"``
and ``"mxfp8"`` (Metal: ``fp_qmv_streamed``, patches "Add an order-preserving
streamed fp qmv kernel" and "Route small fp batches to qmv_streamed"):
``mx.quantized_matmul`` over M from 2 to the mat-vec batch limit,
float16/bfloat16/float32, aligned and ragged (K, N) (``fp_qmv_fast`` and
``fp_qmv`` orders, the moved back last tile, N < 8), B in {1, 3}; and
``mx.qqmm`` with nvfp4 global scales (Metal only: the CPU's qqmm takes one
vector), the path that ran ``fp_qmv`` once per vector before. Bit patterns,
never a tolerance; each test perturbs one input row and must flag exactly
that row (negative control).
"""

from __future__ import annotations

import itertools
import zlib

import mlx.core as mx
import numpy as np
import pytest

from parity_lib import first_mismatch, m_values

MODES = ["mxfp4", "nvfp4", "mxfp8"]
DTYPES = {"float16": (mx.float16, mx.uint16), "bfloat16": (mx.bfloat16, mx.uint16), "float32": (mx.float32, mx.uint32)}
# (K, N): aligned (fp_qmv_fast on Metal: N % 8 == 0, K % 512 == 0 for 4 bits, K % 256 == 0 for 8), ragged
# N and K (fp_qmv, the last tile moved back), K off the fast alignment, N < 8. K in {64, 128} would take
# qmv_quad, which is exact per vector already.
SHAPES = [(512, 128), (384, 67), (640, 40), (256, 5)]
BATCHES = [1, 3]


def _skip_unless_in_scope(backend: str) -> None:
    if backend == "cuda":
        pytest.skip("fp products on CUDA (fp_qmv, qmm_sm80) are outside the queue's exact routing")


def _bits(y: mx.array, uint) -> np.ndarray:
    return np.array(y.view(uint))


def _row(a: np.ndarray, m: int) -> np.ndarray:
    return a[..., m : m + 1, :]


def _rows_differing(batched: np.ndarray, singles: list[np.ndarray], M: int) -> list[int]:
    return [m for m in range(M) if first_mismatch(_row(batched, m), singles[m]) is not None]


def _check(product, x_np, mx_dtype, uint, Ms, backend):
    """Rows of product(x[:M]) == product(x[m]) for every M; then the perturbed-row control."""
    Mmax = Ms[-1]
    x = mx.array(x_np).astype(mx_dtype)
    singles_mx = [product(x[..., m : m + 1, :]) for m in range(Mmax)]
    mx.eval(singles_mx)
    singles = [_bits(s, uint) for s in singles_mx]

    failures = []
    for M in Ms:
        y = _bits(product(x[..., :M, :]), uint)
        assert y.shape[-2] == M
        for m in _rows_differing(y, singles, M):
            failures.append((M, m, first_mismatch(_row(y, m), singles[m])))
    assert not failures, (
        f"{len(failures)} rows differ from M=1 on {backend} (first: M={failures[0][0]}, "
        f"row {failures[0][1]}, element {failures[0][2]})"
    )

    m0 = Mmax // 2
    xp_np = x_np.copy()
    xp_np[..., m0, :] = xp_np[..., m0, :] * 1.5 + 0.25
    yp = _bits(product(mx.array(xp_np).astype(mx_dtype)[..., :Mmax, :]), uint)
    assert _rows_differing(yp, singles, Mmax) == [m0], "negative control: a perturbed row was not (only) flagged"


@pytest.mark.parametrize("B", BATCHES, ids=lambda b: f"B{b}")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s[0]}xN{s[1]}")
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_fp_rows_bitwise_equal_to_m1(backend, arch, mode, dtype, shape, B):
    _skip_unless_in_scope(backend)
    K, N = shape
    mx_dtype, uint = DTYPES[dtype]
    Ms = m_values(backend, K, N, arch)
    assert Ms and Ms[0] == 2, f"empty M sweep for {backend} {arch}"
    rng = np.random.default_rng(zlib.crc32(f"{mode}-{dtype}-{K}-{N}-{B}".encode()))
    x_np = rng.standard_normal((B, Ms[-1], K)).astype(np.float32)
    w_np = (rng.standard_normal((B, N, K)) / np.sqrt(K)).astype(np.float32)
    if B == 1:
        x_np, w_np = x_np[0], w_np[0]
    wq, scales = mx.quantize(mx.array(w_np).astype(mx_dtype), mode=mode)

    def product(x):
        return mx.quantized_matmul(x, wq, scales, transpose=True, mode=mode)

    _check(product, x_np, mx_dtype, uint, Ms, backend)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s[0]}xN{s[1]}")
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_nvfp4_global_scale_rows_bitwise_equal_to_m1(backend, arch, dtype, shape):
    if backend == "cpu":
        pytest.skip("qqmm on the CPU takes one vector (M = 1)")
    _skip_unless_in_scope(backend)
    K, N = shape
    mx_dtype, uint = DTYPES[dtype]
    Ms = m_values(backend, K, N, arch)
    rng = np.random.default_rng(zlib.crc32(f"qqmm-{dtype}-{K}-{N}".encode()))
    x_np = rng.standard_normal((Ms[-1], K)).astype(np.float32)
    w = mx.array((rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)).astype(mx_dtype)
    # One global scale for every x the test makes, so each row is quantized alike.
    gx = mx.array(float(np.abs(x_np).max()) * 2.0, dtype=mx.float32)
    gw = mx.max(mx.abs(w)).astype(mx.float32)
    wq, scales = mx.quantize(w, mode="nvfp4", global_scale=gw)

    def product(x):
        return mx.qqmm(x, wq, scales, mode="nvfp4", global_scale_x=gx, global_scale_w=gw)

    _check(product, x_np, mx_dtype, uint, Ms, backend)


def test_fp_sweep_covers_the_grid(backend, arch):
    for K, N in SHAPES:
        Ms = m_values(backend, K, N, arch)
        assert Ms[0] == 2 and len(Ms) >= (10 if backend == "metal" else 15)
        assert K % 32 == 0 and K not in (64, 128)
    assert any(N % 8 for _, N in SHAPES) and any(N < 8 for _, N in SHAPES)
    assert any(K % 512 == 0 for K, _ in SHAPES) and any(K % 256 for K, _ in SHAPES)
    assert len(list(itertools.product(MODES, DTYPES, SHAPES, BATCHES))) == 72
