"""bench/cuda_qmv_refresh_device.sh with stand-in builds: its parts, the
pull request's tables, the deadline, and the check of the card."""
from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_refresh_device.sh"
MATRIX = "#!/bin/sh\necho \"MATRIX OK (stand-in): $*\"\n"


def _parts(out: Path) -> dict[str, str]:
    lines = (out / "parts.txt").read_text().splitlines()
    return {line.split()[0]: line for line in lines}


def test_refresh_runs_every_part_and_writes_the_pr_tables(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    old = stub_build(tmp_path / "old", 10)
    new = stub_build(tmp_path / "new", 8, qmv_matrix=MATRIX)
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, old, new, CARD="H200", PASSES="1")
    assert done.returncode == 0, done.stdout + done.stderr
    parts = _parts(out)
    assert sorted(parts) == ["ab48", "ab56", "goals", "parity"], parts
    assert all(" rc 0 " in line for line in parts.values()), parts
    # The goals table twice, each with M = 6 beside the others.
    for g in ("g1", "g2"):
        with open(out / "goals" / g / "cuda_qmv_time.csv", newline="") as f:
            ms = {r["M"] for r in csv.DictReader(f) if r["impl"] == "streamed_auto"}
        assert ms == {"1", "2", "4", "6", "8", "12", "16"}, ms
    assert "4096" in (out / "goals" / "pr.md").read_text()
    report = (out / "ab48" / "report.txt").read_text()
    assert "4096x34304 bf16 8-bit M= 1: stock   30.00 |   10.00 (1.000)    8.00 (1.250)" in report
    assert "6-bit" in (out / "ab56" / "report.txt").read_text()
    parity = (out / "parity.txt").read_text()
    assert "PARITY OK" in parity and "MATRIX OK" in parity, parity


def test_refresh_stops_on_another_card_before_timing(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    old = stub_build(tmp_path / "old", 10)
    new = stub_build(tmp_path / "new", 8, qmv_matrix=MATRIX)
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, old, new, CARD="H100")
    assert done.returncode == 3
    assert done.stderr.strip() == (
        "cuda_qmv_refresh_device.sh: the card is 'H200', not an H100: nothing timed")
    assert not out.exists()


def test_refresh_leaves_out_parts_of_limit_zero_and_cuts_at_the_deadline(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    slow = "#!/bin/sh\nsleep 30\n"
    old = stub_build(tmp_path / "old", 10)
    new = stub_build(tmp_path / "new", 8, qmv_matrix=slow)
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, old, new, T="3", GOALS_S="0", AB48_S="0", AB56_S="0")
    assert done.returncode == 1
    parts = _parts(out)
    assert parts["goals"] == "goals left out"
    assert parts["ab48"] == "ab48 left out"
    assert parts["parity"].startswith("parity rc 124 "), parts
    assert int(parts["parity"].split()[3]) <= 4, parts


def test_refresh_keeps_timing_the_goals_after_a_failed_run(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    """A goals run that fails (as the pin's qmm_sm80 check does when its
    epilogue races) still leaves the second run and the pull request's
    tables; the part reports the failure."""
    old = stub_build(tmp_path / "old", 10)
    new = stub_build(tmp_path / "new", 8, qmv_matrix=MATRIX)
    bench = new / "qmv_bench"
    bench.write_text(bench.read_text() + "exit 1\n")
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, old, new, AB48_S="0", PARITY_S="0", AB56_S="0")
    assert done.returncode == 1
    assert _parts(out)["goals"].startswith("goals rc 1 "), _parts(out)
    assert (out / "goals" / "g2" / "cuda_qmv_time.csv").exists()
    assert "4096 x 14336" in (out / "goals" / "pr.md").read_text()


def test_refresh_with_aa_runs_old_again_after_new(
        tmp_path: Path, stub_build: Callable[..., Path], run_script: Callable) -> None:
    """AA=1: each A/B times OLD, NEW and OLD again, so the report carries
    OLD over OLD beside OLD over NEW."""
    old = stub_build(tmp_path / "old", 10)
    new = stub_build(tmp_path / "new", 8, qmv_matrix=MATRIX)
    out = tmp_path / "out"
    done = run_script(SCRIPT, out, old, new, PASSES="1", AA="1", GOALS_S="0", PARITY_S="0")
    assert done.returncode == 0, done.stdout + done.stderr
    for ab in ("ab48", "ab56"):
        assert sorted(p.name for p in (out / ab).glob("b*")) == ["b0", "b1", "b2"]
    report = (out / "ab48" / "report.txt").read_text()
    assert "10.00 (1.000)    8.00 (1.250)   10.00 (1.000)" in report, report
