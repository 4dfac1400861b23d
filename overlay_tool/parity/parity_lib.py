"""Helpers of the API-level parity suite (no pytest, no overlay_tool imports).

This folder is run by ``mlx-overlay test`` with the python of a fresh venv
that holds only the wheel under test, numpy and pytest; it must import
nothing from the project. ``batch_limit`` mirrors ``get_qmv_batch_limit`` in
``mlx/backend/metal/quantized.cpp`` at the pin: the mat-vec path (and so the
streamed kernel) serves ``M < batch_limit(K, N)``; ``M >= limit`` goes to
``qmm``, whose rows are not expected to match ``M = 1``.
"""

from __future__ import annotations

import os
import re

#: M is swept up to at least this on every backend (CPU/CUDA have no
#: Metal batch limit; the Metal sweep uses the limit of the device).
MIN_M_MAX = 16

#: The overlay's benchmarking switch (patch "make qmv_streamed the default
#: and add a route switch"): MLX_QMV_ROUTE=qmv|wide|streamed|streamed:V forces
#: the kernel of affine (and, with the fp overlay patch, fp) mat-vec products
#: on every generation. ("MLX_QMV_WIDE=1"
#: is the policy switch back to qmv_wide on generation 15 and later.)
ROUTE_ENV = os.environ.get("MLX_OVERLAY_PARITY_ROUTE_ENV", "MLX_QMV_ROUTE")
#: Name of the streamed kernel as it appears in mlx.metallib.
STREAMED_KERNEL = os.environ.get("MLX_OVERLAY_PARITY_KERNEL", "affine_qmv_streamed")
#: Host names (prefixes) of the fp streamed kernels, one per fp mode.
FP_STREAMED_KERNELS = ("mxfp4_qmv_streamed", "nvfp4_qmv_streamed", "mxfp8_qmv_streamed")


def parse_arch(arch: str) -> tuple[int, str]:
    """(generation, size letter) of an Apple GPU architecture name, as MLX's Device does.

    ``applegpu_g15s`` -> (15, 's'). Non-digits where the generation should be
    count as 0, like MLX.
    """
    gen = 0
    if len(arch) >= 3:
        tens, ones = arch[-3], arch[-2]
        gen = (int(tens) if tens.isdigit() else 0) * 10 + (int(ones) if ones.isdigit() else 0)
    return gen, (arch[-1] if arch else "")


def batch_limit(K: int, N: int, arch: str) -> int:
    """``get_qmv_batch_limit(D=K, O=N, device)`` of MLX's Metal backend at the pin."""
    gen, size = parse_arch(arch)
    small = K <= 2048 and N <= 2048
    medium = K <= 4096 and N <= 4096
    if gen >= 17 and size != "d":
        return 33 if small else 25 if medium else 13
    if gen >= 15 and size != "d":
        return 13 if small else 15 if medium else 13
    if gen >= 13:
        if size == "d":
            return 32 if small else 18 if medium else 12
        return 14 if small else 10 if medium else 6
    if size == "d":
        return 32 if small else 18 if medium else 12
    return 18 if small else 12 if medium else 10


def uses_qmv_wide(arch: str) -> bool:
    """Stock ``use_qmv_wide`` for affine modes: Apple GPU generation >= 15."""
    return parse_arch(arch)[0] >= 15


def m_values(backend: str, K: int, N: int, arch: str = "") -> list[int]:
    """The M sweep: 2..limit-1 on Metal (the mat-vec path), 2..16 elsewhere."""
    if backend == "metal":
        top = batch_limit(K, N, arch) - 1
    else:
        top = MIN_M_MAX
    return list(range(2, top + 1))


def first_mismatch(a_bits, b_bits):
    """Index of the first differing element of two equal-shape integer arrays, or None."""
    import numpy as np

    a_bits = np.asarray(a_bits)
    b_bits = np.asarray(b_bits)
    if a_bits.shape != b_bits.shape:
        return ("shape", a_bits.shape, b_bits.shape)
    diff = np.argwhere(a_bits != b_bits)
    return None if diff.size == 0 else tuple(int(i) for i in diff[0])


def metallib_has_kernel(metallib: bytes, name: str = STREAMED_KERNEL) -> bool:
    return re.search(re.escape(name).encode(), metallib) is not None
