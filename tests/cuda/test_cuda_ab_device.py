"""bench/cuda_qmv_ab_device.sh with stand-in builds: how often it times
each build, and the medians and ratios its report prints."""
from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_ab_device.sh"


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "cuda_qmv_time.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["impl"] == "streamed_auto"]


def test_ab_times_each_build_passes_times_and_reports_the_ratio(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    b0 = stub_build(tmp_path / "b0", 10)
    b1 = stub_build(tmp_path / "b1", 8)
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, b0, b1, SHAPES="4096,4096 4096,14336", BITS="4", PASSES="3")
    assert done.returncode == 0, done.stderr
    for i in (0, 1):
        rows = _rows(out / f"b{i}")
        # 2 shapes x 2 dtypes x 3 passes x 6 values of M.
        assert len(rows) == 2 * 2 * 3 * 6
    report = (out / "report.txt").read_text().splitlines()
    lines = [line for line in report if "-bit M=" in line]
    assert len(lines) == 2 * 2 * 6
    assert all("10.00 (1.000)" in line and "8.00 (1.250)" in line for line in lines), lines
    assert any(line.startswith(" 4096x4096 fp16 4-bit M=16: stock   30.00") for line in lines), lines


def test_ab_runs_two_passes_by_default(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    b0 = stub_build(tmp_path / "b0", 10)
    b1 = stub_build(tmp_path / "b1", 10)
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, b0, b1, SHAPES="4096,4096", BITS="8")
    assert done.returncode == 0, done.stderr
    assert len(_rows(out / "b1")) == 2 * 2 * 6
