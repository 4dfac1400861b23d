"""Fixtures of the emulator suite.

``pinned_checkout`` is a temporary stand-in for the core helper's fixture of
the same name (tests/conftest.py): a checkout of upstream mlx at the pin in
pin.toml, made with the user's git configuration (so a
``url.<mirror>.insteadOf`` mirror keeps working offline). Delete it here once
the shared one lands.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from overlay_tool.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]


def _pin() -> tuple[str, str]:
    data = tomllib.loads((ROOT / "pin.toml").read_text())
    return data["upstream"]["url"], data["upstream"]["commit"]


@pytest.fixture(scope="session")
def pinned_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    url, commit = _pin()
    dest = tmp_path_factory.mktemp("upstream") / "mlx"
    subprocess.run(["git", "clone", "-q", "--no-checkout", url, str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", commit], check=True)
    return dest


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
