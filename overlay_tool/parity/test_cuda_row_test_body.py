"""MLX's CUDA row test (patch 0010), its body run on the CPU.

``test_cuda_qmv_rows_match_single_vector`` skips wherever there is no CUDA
GPU, so on the machines CI runs on nothing but the H200 ever executes it: a
body that cannot run at all there (on 2026-12-01 the H200 found 108 of its
subtests raising ``ValueError`` in ``mx.quantize``: K = 576 at groups of 128)
went unseen through every CPU run. Its body is plain MLX (quantize,
``quantized_matmul``, compare rows), so here it runs on the CPU with the
CUDA questions answered as an sm_90 GPU would answer them: every subtest
must run and pass (the CPU computes each row on its own).

Negative control: the same body with the first row of every product of more
than one vector changed must fail every subtest, so the sweep is not empty and
its comparison can fail.

``mlx-overlay test`` names the checkout's tests folder in
``MLX_OVERLAY_MLX_TESTS``. On CUDA, MLX's suite runs the test itself; on
Metal, Metal's own row tests cover the route (its batch limit is the
device's, not CUDA's 16).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import unittest
from pathlib import Path
from types import ModuleType, SimpleNamespace

import mlx.core as mx
import pytest

TEST = "test_cuda_qmv_rows_match_single_vector"


class AsIfCuda:
    """``mlx.core`` as the test sees it on an sm_90 GPU; the work stays on this device.

    With ``nudge``, the first row of every product of more than one vector
    is changed (the negative control).
    """

    def __init__(self, nudge: bool = False) -> None:
        self.nudge = nudge
        self.cuda = SimpleNamespace(is_available=lambda: True)

    def __getattr__(self, name: str):
        return getattr(mx, name)

    def default_device(self) -> mx.Device:
        return mx.Device(mx.gpu)

    def device_info(self) -> dict:
        return {**mx.device_info(), "architecture": "sm_90"}

    def quantized_matmul(self, x: mx.array, *args, **kwargs) -> mx.array:
        y = mx.quantized_matmul(x, *args, **kwargs)
        if self.nudge and x.shape[-2] > 1:
            y = mx.concatenate([y[..., :1, :] * 2 + 1, y[..., 1:, :]], axis=-2)
        return y


class Tally(unittest.TestResult):
    """Counts subtests, and keeps the first failures' parameters and messages."""

    def __init__(self) -> None:
        super().__init__()
        self.subtests = 0
        self.failed: list[str] = []

    def addSubTest(self, test, subtest, err) -> None:  # noqa: N802 (unittest's name)
        self.subtests += 1
        if err is not None:
            self.failed.append(f"{subtest._subDescription()}: {err[0].__name__}: {err[1]}")


@pytest.fixture(scope="module")
def mlx_test_module(backend: str) -> ModuleType:
    if backend != "cpu":
        reason = ("MLX's suite runs it on this GPU" if backend == "cuda"
                  else "Metal's row tests cover this backend")
        pytest.skip(f"the CUDA row test's body runs here on the CPU only ({reason})")
    folder = os.environ.get("MLX_OVERLAY_MLX_TESTS")
    if not folder:
        pytest.skip("MLX_OVERLAY_MLX_TESTS is not set: run through mlx-overlay test, "
                    "which names the patched checkout's python/tests")
    path = Path(folder) / "test_quantized.py"
    if not path.is_file():
        pytest.fail(f"{path}: not found (MLX_OVERLAY_MLX_TESTS)")
    sys.path.insert(0, str(path.parent))  # test_quantized imports mlx_tests beside it
    spec = importlib.util.spec_from_file_location("mlx_test_quantized", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module.TestQuantized, TEST):
        pytest.fail(f"{path}: TestQuantized.{TEST} not found (patch 0010 adds it)")
    return module


def run_body(module: ModuleType, monkeypatch: pytest.MonkeyPatch, *, nudge: bool) -> Tally:
    monkeypatch.setattr(module, "mx", AsIfCuda(nudge))
    monkeypatch.delenv("MLX_QMV_WIDE", raising=False)
    tally = Tally()
    module.TestQuantized(TEST).run(tally)
    assert not tally.skipped, tally.skipped
    assert not tally.errors, tally.errors[0][1]
    return tally


def test_cuda_row_test_body_passes_on_the_cpu(mlx_test_module, monkeypatch) -> None:
    tally = run_body(mlx_test_module, monkeypatch, nudge=False)
    assert tally.subtests > 0
    assert not tally.failed, f"{len(tally.failed)} of {tally.subtests} subtests failed; first: {tally.failed[0]}"


def test_cuda_row_test_body_detects_a_changed_row(mlx_test_module, monkeypatch) -> None:
    tally = run_body(mlx_test_module, monkeypatch, nudge=True)
    assert tally.subtests > 0
    assert len(tally.failed) == tally.subtests, tally.failed[:3]
    assert all("AssertionError" in f for f in tally.failed), tally.failed[:3]
