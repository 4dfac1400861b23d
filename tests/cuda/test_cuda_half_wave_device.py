"""bench/cuda_qmv_half_wave_device.sh, run here with stand-ins for the
harness binaries (conftest.py's logging_build): which build each part
calls, with which arguments, and that a failing part fails the call
without stopping the parts after it."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from .ab_parity_calls import assert_ab_then_parity, assert_failed_part_keeps_the_rest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_half_wave_device.sh"


def _call(tmp_path: Path, bx: Path, by: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PASSES": "1", "T_SHAPES": "4096,4096", "SHAPES": "4096,4096",
           "AB_S": "30", "PARITY_S": "30"}
    return subprocess.run(["bash", str(SCRIPT), str(bx), str(by), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_times_the_tails_on_bx_then_the_ab_then_by_s_parity(tmp_path: Path,
        logging_build: Callable[..., Path]) -> None:
    log = tmp_path / "log.txt"
    bx, by = logging_build(tmp_path / "bx", log), logging_build(tmp_path / "by", log)
    run = _call(tmp_path, bx, by)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = log.read_text().splitlines()
    tails = [c for c in calls if "--time" in c and "8,4,2,3,2,4" in c]
    # Part 1: BX alone, 4-bit rings with T = 1, 2 and 4, bfloat16 and float16.
    assert len(tails) == 2 and all(c.startswith(f"{bx}/qmv_bench") for c in tails)
    assert all("8,4,2,3,2,1 8,4,2,3,2,2 8,4,2,3,2,4" in c and "8,4,4,3,4,4" in c for c in tails)
    assert any("--time 0,8,4096,4096" in c and "2,4,1,8,1,4" in c and "2,4,2,8,2,4" in c for c in calls)
    assert_ab_then_parity(calls, bx, by, tmp_path / "out", run)


def test_a_failing_build_fails_the_call_and_the_later_parts_still_run(tmp_path: Path,
        logging_build: Callable[..., Path]) -> None:
    log = tmp_path / "log.txt"
    bx, by = logging_build(tmp_path / "bx", log, rc=1), logging_build(tmp_path / "by", log)
    run = _call(tmp_path, bx, by)
    assert_failed_part_keeps_the_rest(log, by, "part 1 (T = 1, 2, 4)", run)
