"""bench/cuda_qmv_experiment_device.sh, the one device call that measures an
experiment on the streamed kernels against the queue, run here with
stand-ins for the harness (a wasted device call costs minutes of a 30-minute
budget)."""
from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_experiment_device.sh"

# qmv_bench: --quick prints a verdict; --time writes a stock row and one row
# per configuration (the dispatch's time is the build's SPEED, qmm_sm80 50).
BENCH = """#!/bin/bash
case "$1" in --quick) echo "PARITY OK: $*"; exit 0;; esac
out=$2; spec=$4; shift 4
IFS=, read -r dt bits k n <<< "$spec"
f=$out/cuda_qmv_time.csv
[ -s "$f" ] || echo "shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps" > "$f"
d=$([ "$dt" = 0 ] && echo bf16 || echo fp16)
for c in "$@"; do
  IFS=, read -r W R V D M <<< "$c"
  if [ "$W" = sm80 ]; then echo "${k}x${n},$d,$bits,qmm_sm80,0,0,0,0,$R,50,0,0" >> "$f"; continue; fi
  impl=$([ "$W" = 0 ] && echo streamed_auto || echo streamed)
  echo "${k}x${n},$d,$bits,stock_qmv,0,0,0,0,$M,30,0,0" >> "$f"
  echo "${k}x${n},$d,$bits,$impl,$W,$R,$V,$D,$M,SPEED,0,0" >> "$f"
done
"""

# qmv_matrix: a verdict, and a per-row CSV too large to come back (5 MB).
MATRIX = """#!/bin/sh
out=$(echo "$@" | sed 's/.*--out \\([^ ]*\\).*/\\1/')
head -c 5000000 /dev/zero > "$out/rows.csv"
echo "MATRIX PARITY OK: NAME $*"
exit RC
"""


def _build(folder: Path, speed: int, matrix_rc: int = 0) -> Path:
    folder.mkdir(parents=True)
    (folder / "qmv_bench").write_text(BENCH.replace("SPEED", str(speed)))
    (folder / "qmv_matrix").write_text(MATRIX.replace("NAME", folder.name).replace("RC", str(matrix_rc)))
    for f in folder.iterdir():
        f.chmod(0o755)
    return folder


def _run(tmp_path: Path, matrix_rc: int, **extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    b0 = _build(tmp_path / "b0", 20)
    b1 = _build(tmp_path / "b1", 16, matrix_rc)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho H200\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NCU": "0", **extra}
    run = subprocess.run(["bash", str(SCRIPT), str(b0), str(b1), str(out)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return run, out


def _unpacked(out: Path, tmp_path: Path) -> Path:
    """What comes back from the device: at most 8 files, the small ones in
    out.tar.gz."""
    files = [p for p in out.rglob("*") if p.is_file()]
    assert [p.name for p in files] == ["out.tar.gz"]
    dest = tmp_path / "back"
    with tarfile.open(out / "out.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def test_the_call_times_both_builds_checks_b1_and_returns_what_fits(tmp_path: Path) -> None:
    run, out = _run(tmp_path, 0)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.rstrip().endswith("status 0")
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
    assert f"{out}/nonfinite/rows.csv" in run.stdout
    assert not list(back.rglob("rows.csv"))
    assert not (back / "ncu").exists()


def test_a_failed_check_fails_the_call_and_the_rest_still_runs(tmp_path: Path) -> None:
    run, out = _run(tmp_path, 1)
    assert run.returncode == 1
    assert run.stdout.rstrip().endswith("status 1")
    back = _unpacked(out, tmp_path)
    assert (back / "nonfinite" / "stdout.txt").is_file()


def test_bits_names_the_widths_of_the_ab_and_of_the_quick_parity(tmp_path: Path) -> None:
    run, out = _run(tmp_path, 0, BITS="4 8")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    back = _unpacked(out, tmp_path)
    report = (back / "ab" / "report.txt").read_text()
    assert " 4-bit M=" in report and " 8-bit M=" in report
    for bits in (4, 8):
        assert (back / f"quick{bits}" / "stdout.txt").read_text().startswith(f"PARITY OK: --quick --bits {bits}")
