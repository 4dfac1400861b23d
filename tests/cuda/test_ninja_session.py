"""bench/ninja_session.sh: ninja left compiling at a device call's limit, and
waited for by the next call instead of started again (session 29: a limit
that killed ninja made MLX's longest object start over in every call)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "ninja_session.sh"

@pytest.fixture(autouse=True)
def _ninja_and_setsid() -> None:
    """ci/test installs both; elsewhere their absence skips, loudly."""
    missing = [tool for tool in ("ninja", "setsid") if shutil.which(tool) is None]
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must have {' and '.join(missing)} (ci/test installs ninja-build and util-linux)")
    if missing:
        pytest.skip(f"no {' or '.join(missing)} here: install ninja-build / util-linux")


def _build(tmp_path: Path, command: str) -> Path:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "build.ninja").write_text(f"rule r\n  command = {command}\nbuild out.txt: r\n")
    return tmp_path / "b"


def _session(tmp_path: Path, limit: int, log: str, build: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path / "state"), str(limit), str(tmp_path / log),
                           "-C", str(build)], capture_output=True, text=True, timeout=60)


def test_ninja_outlives_the_limit_and_the_next_run_waits_for_it(tmp_path: Path) -> None:
    build = _build(tmp_path, "sleep 3 && echo built >> count && touch $out")
    first = _session(tmp_path, 1, "log1", build)
    assert first.returncode == 124, first.stdout + first.stderr
    assert "ninja still running after 1 s" in first.stdout
    pid = int((tmp_path / "state" / "ninja.pid").read_text())
    # A session of its own, so that the end of a device call does not kill it.
    assert os.getsid(pid) == pid
    second = _session(tmp_path, 30, "log2", build)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"waiting for the ninja an earlier call left running (pid {pid})" in second.stdout
    assert (build / "count").read_text() == "built\n"  # compiled once
    assert "[1/1]" in (tmp_path / "log2").read_text()
    # Once it has ended, a run starts a ninja of its own.
    third = _session(tmp_path, 30, "log3", build)
    assert third.returncode == 0 and "waiting" not in third.stdout
    assert "no work to do" in (tmp_path / "log3").read_text()


def test_ninja_s_failure_is_the_exit_status(tmp_path: Path) -> None:
    build = _build(tmp_path, "echo broken && exit 3")
    run = _session(tmp_path, 0, "log", build)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "broken" in (tmp_path / "log").read_text() and "FAILED" in (tmp_path / "log").read_text()


def test_usage(tmp_path: Path) -> None:
    run = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and "usage:" in run.stderr


def test_the_device_build_runs_ninja_in_a_session() -> None:
    script = (ROOT / "bench" / "cuda_mlx_build_device.sh").read_text()
    assert 'ninja_session.sh" "$WORK/ninja" "$LIMIT" "$OUT/build.log" -C "$WORK/build" -j "$JOBS" core' in script
    assert "timeout \"$LIMIT\"" not in script
