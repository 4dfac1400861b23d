"""bench/experiments/cuda_tensor_promote/time_device.sh, the one device call
that measures the tensor-core promotion, run here with stand-ins for the
harness (a wasted device call costs minutes of a 30-minute budget)."""
from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "experiments" / "cuda_tensor_promote" / "time_device.sh"

Run = Callable[..., tuple[subprocess.CompletedProcess[str], Path]]


@pytest.fixture
def run(tmp_path: Path, stub_build: Callable[..., Path],
        run_script: Callable[..., subprocess.CompletedProcess[str]]) -> Run:
    """The call on stand-in builds: B0, B1 (twice as fast, with a
    promote_check exiting with check_rc) and the further builds named, each
    with a qmv_matrix that says which build it is."""

    def call(check_rc: int, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        def build(name: str, speed: int, **programs: str) -> Path:
            matrix = f'#!/bin/sh\necho "MATRIX PARITY OK: {name} $*"\n'
            return stub_build(tmp_path / name, speed, qmv_matrix=matrix, **programs)

        check = f'#!/bin/sh\necho "MMA PROMOTE fp16 checked"\nexit {check_rc}\n'
        builds = [build("b0", 20), build("b1", 16, promote_check=check), *(build(b, 25) for b in extra)]
        out = tmp_path / "out"
        return run_script(SCRIPT, *builds[:2], out, *builds[2:]), out

    return call


def test_the_call_checks_the_premise_times_both_builds_and_runs_both_nonfinite_matrices(run: Run) -> None:
    proc, out = run(0, "b2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.index("MMA PROMOTE") < proc.stdout.index("dispatch us per build")
    assert (out / "promote_check.txt").read_text() == "MMA PROMOTE fp16 checked\n"
    # The A/B at 8 bits only, B1's dispatch 20 / 16 = 1.25 times as fast,
    # and the further build given after OUT beside them (20 / 25).
    report = (out / "ab" / "report.txt").read_text()
    rows = [r for r in report.splitlines() if "-bit M=" in r]
    assert rows and all(" 8-bit " in r and "(1.250)" in r and "(0.800)" in r for r in rows)
    # The rings beside qmm_sm80, each build in its own folder.
    for i in (0, 1):
        assert "qmm_sm80" in (out / f"c{i}" / "cuda_qmv_time.csv").read_text()
    # B1's parity; the matrix with infinities on both builds.
    assert (out / "quick8" / "stdout.txt").read_text().startswith("PARITY OK: --quick --bits 8")
    assert (out / "matrix" / "stdout.txt").read_text() == f"MATRIX PARITY OK: b1 --out {out}/matrix --no-time\n"
    for b in (0, 1):
        assert (out / f"nonfinite_b{b}" / "stdout.txt").read_text() == (
            f"MATRIX PARITY OK: b{b} --nonfinite --out {out}/nonfinite_b{b}\n")
    assert not (out / "ncu").exists()


def test_the_call_fails_when_the_premise_fails_and_still_runs_the_rest(run: Run) -> None:
    proc, out = run(1)
    assert proc.returncode == 1
    assert proc.stdout.rstrip().endswith("status 1")
    assert (out / "nonfinite_b0" / "stdout.txt").is_file()
