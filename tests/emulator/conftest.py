"""Fixtures of the emulator suite (``pinned_checkout`` comes from
tests/conftest.py: upstream mlx at the pin, without patches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay_tool.emulator import Emulator
from overlay_tool.emulator.fp import FpEmulator


@pytest.fixture(scope="session")
def stock_header(pinned_checkout: Path) -> Path:
    return pinned_checkout / "mlx" / "backend" / "metal" / "kernels" / "quantized.h"


@pytest.fixture(scope="session")
def stock_text(stock_header: Path) -> str:
    return stock_header.read_text()


@pytest.fixture(scope="session")
def emu(stock_header: Path) -> Emulator:
    """The stock kernels, contraction off (the default)."""
    return Emulator(stock_header)


@pytest.fixture(scope="session")
def fp_header(pinned_checkout: Path) -> Path:
    return pinned_checkout / "mlx" / "backend" / "metal" / "kernels" / "fp_quantized.h"


@pytest.fixture(scope="session")
def fp_emu(fp_header: Path) -> FpEmulator:
    """The stock fp kernels (fp_quantized.h with fp4.h, fp8.h), contraction off."""
    return FpEmulator(fp_header)


@pytest.fixture(scope="session")
def report(request: pytest.FixtureRequest):
    """Lines for the end-of-session emulator report (printed by the terminal
    summary hook below and written to $MLX_OVERLAY_EMULATOR_REPORT if set)."""
    lines: list[str] = []
    request.config._emulator_report = lines  # type: ignore[attr-defined]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lines = getattr(config, "_emulator_report", None)
    if not lines:
        return
    terminalreporter.section("emulator report")
    for ln in lines:
        terminalreporter.write_line(ln)
    import os

    out = os.environ.get("MLX_OVERLAY_EMULATOR_REPORT")
    if out:
        Path(out).write_text("\n".join(lines) + "\n")
