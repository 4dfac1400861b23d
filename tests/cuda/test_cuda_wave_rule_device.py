"""bench/cuda_qmv_wave_rule_device.sh, run here with stand-ins for the
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
SCRIPT = ROOT / "bench" / "cuda_qmv_wave_rule_device.sh"


def _call(tmp_path: Path, bx: Path, bz: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "R_SHAPES": "4096,14336", "R_MS": "4 8", "SHAPES": "4096,4096",
           "R_S": "30", "AB_S": "30", "PARITY_S": "30"}
    return subprocess.run(["bash", str(SCRIPT), str(bx), str(bz), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_times_the_dispatch_on_bx_then_the_ab_then_bz_s_parity(tmp_path: Path,
        logging_build: Callable[..., Path]) -> None:
    log = tmp_path / "log.txt"
    bx, bz = logging_build(tmp_path / "bx", log), logging_build(tmp_path / "bz", log)
    run = _call(tmp_path, bx, bz)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = log.read_text().splitlines()
    # Part 1: BX alone, 8-bit rings at full size beside the dispatch, two
    # passes, bfloat16 and float16.
    rings = [c for c in calls if "/out/r/" in c]
    assert len(rings) == 4 and all(c.startswith(f"{bx}/qmv_bench") for c in rings)
    assert all(",8,4096,14336 0,0,0,0,4 2,4,4,6,4,1 0,0,0,0,8 4,2,8,6,8,1" in c for c in rings)
    assert_ab_then_parity(calls, bx, bz, tmp_path / "out", run)


def test_a_failing_build_fails_the_call_and_the_later_parts_still_run(tmp_path: Path,
        logging_build: Callable[..., Path]) -> None:
    log = tmp_path / "log.txt"
    bx, bz = logging_build(tmp_path / "bx", log, rc=1), logging_build(tmp_path / "bz", log)
    run = _call(tmp_path, bx, bz)
    assert_failed_part_keeps_the_rest(log, bz, "part 1 (dispatch and full size)", run)


def test_goals_runs_the_queue_s_table_twice_on_bz_and_writes_the_pr_s_tables(tmp_path: Path,
        logging_build: Callable[..., Path]) -> None:
    """GOALS_S adds part 0, BZ's goals table twice with M = 6 for the pull
    request's table; R_S=0 leaves part 1 out."""
    log = tmp_path / "log.txt"
    bx, bz = logging_build(tmp_path / "bx", log), logging_build(tmp_path / "bz", log)
    env = {**os.environ, "GOALS_S": "30", "R_S": "0", "SHAPES": "4096,4096", "AB_S": "30",
           "PARITY_S": "30"}
    run = subprocess.run(["bash", str(SCRIPT), str(bx), str(bz), str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = log.read_text().splitlines()
    goals = [c for c in calls if "/out/goals/" in c]
    # Two runs, each the three shapes in both dtypes at 4 and 8 bits.
    assert len(goals) == 24 and all(c.startswith(f"{bz}/qmv_bench") for c in goals)
    assert {c.split("/out/goals/")[1].split()[0] for c in goals} == {"g1", "g2"}
    assert all(" 0,0,0,0,4 0,0,0,0,6 0,0,0,0,8 " in c and c.endswith(" sm80,16") for c in goals)
    pr = (tmp_path / "out" / "goals" / "pr.md").read_text()
    assert pr.startswith("| K x N | dtype | bits | M = 2 |\n")
    assert "| 4096 x 4096 | bf16 | 4 | 9.0 / 5.0 (1.80x) |" in pr
    assert "part 0 (goals, twice)" in run.stdout and "part 1" not in run.stdout
    assert not any("/out/r/" in c for c in calls)
    assert_ab_then_parity(calls, bx, bz, tmp_path / "out", run)
