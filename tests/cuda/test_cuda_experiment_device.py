"""bench/cuda_qmv_experiment_device.sh, the one device call that measures an
experiment on the streamed kernels against the queue, run here with
stand-ins for the harness (a wasted device call costs minutes of a 30-minute
budget)."""
from __future__ import annotations

import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_experiment_device.sh"

# qmv_matrix: a verdict, and a per-row CSV too large to come back (5 MB).
MATRIX = """#!/bin/sh
out=$(echo "$@" | sed 's/.*--out \\([^ ]*\\).*/\\1/')
head -c 5000000 /dev/zero > "$out/rows.csv"
echo "MATRIX PARITY OK: NAME $*"
exit RC
"""


Run = Callable[..., tuple[subprocess.CompletedProcess[str], Path]]


@pytest.fixture
def run(tmp_path: Path, stub_build: Callable[..., Path],
        run_script: Callable[..., subprocess.CompletedProcess[str]]) -> Run:
    """The call on stand-in builds B0 and B1 (B1 1.25 times as fast, its
    qmv_matrix exiting with matrix_rc)."""

    def call(matrix_rc: int, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        b0 = stub_build(tmp_path / "b0", 20, qmv_matrix=MATRIX.replace("NAME", "b0").replace("RC", "0"))
        b1 = stub_build(tmp_path / "b1", 16,
                        qmv_matrix=MATRIX.replace("NAME", "b1").replace("RC", str(matrix_rc)))
        out = tmp_path / "out"
        return run_script(SCRIPT, b0, b1, out, **env), out

    return call


def _unpacked(out: Path, tmp_path: Path) -> Path:
    """What comes back from the device: at most 8 files, the small ones in
    out.tar.gz."""
    files = [p for p in out.rglob("*") if p.is_file()]
    assert [p.name for p in files] == ["out.tar.gz"]
    dest = tmp_path / "back"
    with tarfile.open(out / "out.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def test_the_call_times_both_builds_checks_b1_and_returns_what_fits(tmp_path: Path, run: Run) -> None:
    proc, out = run(0)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.rstrip().endswith("status 0")
    back = _unpacked(out, tmp_path)
    # The A/B at 8 bits only, B1's dispatch 20 / 16 = 1.25 times as fast.
    report = (back / "ab" / "report.txt").read_text()
    rows = [r for r in report.splitlines() if "-bit M=" in r]
    assert rows and all(" 8-bit " in r and "(1.250)" in r for r in rows)
    # The rings beside qmm_sm80, each build in its own folder.
    for i in (0, 1):
        assert "qmm_sm80" in (back / f"c{i}" / "cuda_qmv_time.csv").read_text()
    # B1's parity: quick, ragged, the matrix and the matrix with infinities;
    # the per-row CSVs over 4 MiB deleted, and said so.
    assert (back / "quick8" / "stdout.txt").read_text().startswith("PARITY OK: --quick --bits 8")
    assert (back / "ragged" / "stdout.txt").read_text().startswith("PARITY OK: --quick --ragged")
    assert (back / "matrix" / "stdout.txt").read_text().startswith("MATRIX PARITY OK: b1 ")
    assert (back / "nonfinite" / "stdout.txt").read_text() == (
        f"MATRIX PARITY OK: b1 --nonfinite --out {out}/nonfinite\n")
    assert f"{out}/nonfinite/rows.csv" in proc.stdout
    assert not list(back.rglob("rows.csv"))
    assert not (back / "ncu").exists()


def test_a_failed_check_fails_the_call_and_the_rest_still_runs(tmp_path: Path, run: Run) -> None:
    proc, out = run(1)
    assert proc.returncode == 1
    assert proc.stdout.rstrip().endswith("status 1")
    back = _unpacked(out, tmp_path)
    assert (back / "nonfinite" / "stdout.txt").is_file()


def test_bits_names_the_widths_of_the_ab_and_of_the_quick_parity(tmp_path: Path, run: Run) -> None:
    proc, out = run(0, BITS="4 8")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    back = _unpacked(out, tmp_path)
    report = (back / "ab" / "report.txt").read_text()
    assert " 4-bit M=" in report and " 8-bit M=" in report
    for bits in (4, 8):
        assert (back / f"quick{bits}" / "stdout.txt").read_text().startswith(f"PARITY OK: --quick --bits {bits}")
