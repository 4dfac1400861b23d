"""Fixtures for the qmv_streamed proof.

The headers come from the core suite's ``pinned_checkout`` (upstream at the
pin) and ``patched_checkout`` (the whole queue applied by ``apply_queue``),
defined in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HEADER = Path("mlx/backend/metal/kernels/quantized.h")


@pytest.fixture(scope="session")
def stock_header(pinned_checkout) -> Path:
    return pinned_checkout / HEADER


@pytest.fixture(scope="session")
def patched_header(patched_checkout) -> Path:
    return patched_checkout / HEADER


FP_HEADER = Path("mlx/backend/metal/kernels/fp_quantized.h")


@pytest.fixture(scope="session")
def stock_fp_header(pinned_checkout) -> Path:
    return pinned_checkout / FP_HEADER


@pytest.fixture(scope="session")
def patched_fp_header(patched_checkout) -> Path:
    return patched_checkout / FP_HEADER
