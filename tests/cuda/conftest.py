"""Fixtures of the CUDA harness tests.

`pinned_checkout` is a temporary stand-in, named like the core fixture in
tests/conftest.py (a checkout of upstream mlx at the pin, user's git config
kept so a url.<mirror>.insteadOf works); drop it once the core one is merged.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))


def _pin() -> tuple[str, str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore
    data = tomllib.loads((ROOT / "pin.toml").read_text())
    up = data.get("upstream", data)
    return up["url"], up["commit"]


@pytest.fixture(scope="session")
def pinned_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    url, commit = _pin()
    dest = tmp_path_factory.mktemp("mlx-pin") / "mlx"
    for args in (["clone", "-q", "--no-checkout", url, str(dest)],
                 ["-C", str(dest), "checkout", "-q", "--detach", commit]):
        p = subprocess.run(["git", *args], capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError(f"git {' '.join(args)}: {p.stderr.strip()}")
    return dest
