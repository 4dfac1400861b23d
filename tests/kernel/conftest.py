"""Fixtures for the qmv_streamed proof.

``pinned_checkout`` and ``patched_checkout`` are temporary stand-ins for the
core suite's fixtures of the same names (tests/conftest.py): a checkout of
upstream mlx at the pin (the user's global git config is kept, so a configured
mirror serves the URL), and the same with this branch's patches applied with
``git apply`` in the order of patches/series.kernel.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADER = Path("mlx/backend/metal/kernels/quantized.h")


def _git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def kernel_series() -> list[Path]:
    lines = (ROOT / "patches" / "series.kernel").read_text().splitlines()
    names = [ln.split()[0] for ln in lines if ln.strip() and not ln.startswith("#")]
    return [ROOT / "patches" / n for n in names]


@pytest.fixture(scope="session")
def pinned_checkout(tmp_path_factory) -> Path:
    pin = tomllib.loads((ROOT / "pin.toml").read_text())["upstream"]
    dest = tmp_path_factory.mktemp("pinned") / "mlx"
    _git("clone", "--quiet", "--no-checkout", pin["url"], str(dest))
    _git("checkout", "--quiet", "--detach", pin["commit"], cwd=dest)
    return dest


@pytest.fixture(scope="session")
def patched_checkout(pinned_checkout, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("patched") / "mlx"
    _git("clone", "--quiet", "--no-checkout", str(pinned_checkout), str(dest))
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pinned_checkout, check=True,
        capture_output=True, text=True,
    ).stdout.strip()
    _git("checkout", "--quiet", "--detach", head, cwd=dest)
    for patch in kernel_series():
        _git("apply", "--index", str(patch), cwd=dest)
    return dest


@pytest.fixture(scope="session")
def stock_header(pinned_checkout) -> Path:
    return pinned_checkout / HEADER


@pytest.fixture(scope="session")
def patched_header(patched_checkout) -> Path:
    return patched_checkout / HEADER
