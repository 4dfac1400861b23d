"""Headers for the probe's emulator substrate: the pinned quantized.h, and a
patched one that carries qmv_streamed.

While the kernel patches are listed in patches/series.kernel rather than in
patches/series, the patched checkout is the pin plus those patches (``git
apply`` in order, as tests/kernel does); once patches/series carries the
kernel, the core ``patched_checkout`` fixture (apply_queue) serves.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADER = "mlx/backend/metal/kernels/quantized.h"


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _names(series: Path) -> list[str]:
    if not series.is_file():
        return []
    return [ln.split()[0] for ln in series.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


@pytest.fixture(scope="session")
def stock_header(pinned_checkout) -> Path:
    return pinned_checkout / HEADER


@pytest.fixture(scope="session")
def patched_header(request, pinned_checkout, tmp_path_factory) -> Path:
    queue = _names(ROOT / "patches" / "series")
    if any("qmv_streamed_impl" in (ROOT / "patches" / n).read_text(errors="replace") for n in queue):
        return request.getfixturevalue("patched_checkout") / HEADER
    dest = tmp_path_factory.mktemp("probe-patched") / "mlx"
    _git("clone", "--quiet", "--no-checkout", str(pinned_checkout), str(dest))
    _git("checkout", "--quiet", "--detach", _git("rev-parse", "HEAD", cwd=pinned_checkout).strip(), cwd=dest)
    for name in _names(ROOT / "patches" / "series.kernel"):
        _git("apply", str(ROOT / "patches" / name), cwd=dest)
    header = dest / HEADER
    assert "qmv_streamed_impl" in header.read_text(), "no patch of the queue adds qmv_streamed"
    return header
