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


def test_ab_lists_launches_whose_passes_spread(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    """A build whose passes alternate 10 and 11 us (one process each, as
    5- and 6-bit M = 8 on 4096 x 20480 do on an H100) is listed with its
    passes; a steady one is not."""
    steady = stub_build(tmp_path / "b0", 10)
    # Each call of the stand-in bumps a count, then reads it: 11 us on its
    # first call, 10 on its second, and so on.
    count = tmp_path / "count"
    speed = f'$(c=$(cat {count} 2>/dev/null || echo 0); echo $((10 + c % 2)))'
    bimodal = stub_build(tmp_path / "b1", speed)
    text = (bimodal / "qmv_bench").read_text()
    (bimodal / "qmv_bench").write_text(text.replace(
        'case "$1"', f'c=$(cat {count} 2>/dev/null || echo 0); echo $((c + 1)) > {count}\ncase "$1"', 1))
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, steady, bimodal, SHAPES="4096,4096", BITS="4", PASSES="3")
    assert done.returncode == 0, done.stderr
    report = (out / "report.txt").read_text().splitlines()
    start = report.index("passes more than 3% apart (us, each build's passes in order):")
    listed = report[start + 1:]
    # 2 dtypes x 6 values of M; b0's passes first, then b1's.
    assert len(listed) == 12, listed
    assert listed[0] == "  4096x4096 bf16 4 bits, 1 vectors: 10.00 10.00 10.00 | 11.00 10.00 11.00", listed
