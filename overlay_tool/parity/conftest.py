"""Fixtures of the API-level parity suite: which backend is present.

``MLX_OVERLAY_PARITY_EXPECT`` (set by ``mlx-overlay test``) names the backend
the wheel was built for; a mismatch fails the session instead of quietly
testing another device (a Metal wheel that silently runs on the CPU proves
nothing about the Metal kernel).
"""

from __future__ import annotations

import os

import mlx.core as mx
import pytest


def detect_backend() -> tuple[str, str]:
    """(backend, architecture or device name) of the default device."""
    try:
        if mx.metal.is_available():
            info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
            return "metal", str(info.get("architecture", ""))
    except Exception:  # pragma: no cover - depends on the wheel
        pass
    try:
        if hasattr(mx, "cuda") and mx.cuda.is_available():
            info = mx.device_info() if hasattr(mx, "device_info") else {}
            return "cuda", str(info.get("device_name", info.get("architecture", "")))
    except Exception:  # pragma: no cover
        pass
    return "cpu", ""


BACKEND, ARCH = detect_backend()


def pytest_report_header(config):
    return [f"mlx {mx.__version__}; parity backend: {BACKEND}{' (' + ARCH + ')' if ARCH else ''}; default device: {mx.default_device()}"]


def pytest_sessionstart(session):
    expect = os.environ.get("MLX_OVERLAY_PARITY_EXPECT")
    if expect and expect != BACKEND:
        raise pytest.UsageError(
            f"parity suite expected backend {expect!r} but this mlx runs on {BACKEND!r}"
        )


@pytest.fixture(scope="session")
def backend() -> str:
    return BACKEND


@pytest.fixture(scope="session")
def arch() -> str:
    return ARCH
