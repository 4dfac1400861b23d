"""bench/experiments/cuda_tensor_promote/time_device.sh, the one device call
that measures the tensor-core promotion, run here with stand-ins for the
harness (a wasted device call costs minutes of a 30-minute budget)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "experiments" / "cuda_tensor_promote" / "time_device.sh"

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


def _build(folder: Path, speed: int, check_rc: int | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "qmv_bench").write_text(BENCH.replace("SPEED", str(speed)))
    (folder / "qmv_matrix").write_text(f'#!/bin/sh\necho "MATRIX PARITY OK: {folder.name} $*"\n')
    if check_rc is not None:
        (folder / "promote_check").write_text(f'#!/bin/sh\necho "MMA PROMOTE fp16 checked"\nexit {check_rc}\n')
    for f in folder.iterdir():
        f.chmod(0o755)
    return folder


def _run(tmp_path: Path, check_rc: int, *extra: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    b0 = _build(tmp_path / "b0", 20)
    b1 = _build(tmp_path / "b1", 16, check_rc)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho H200\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NCU": "0"}
    run = subprocess.run(["bash", str(SCRIPT), str(b0), str(b1), str(out), *map(str, extra)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return run, out


def test_the_call_checks_the_premise_times_both_builds_and_runs_both_nonfinite_matrices(tmp_path: Path) -> None:
    run, out = _run(tmp_path, 0, _build(tmp_path / "b2", 25))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.index("MMA PROMOTE") < run.stdout.index("dispatch us per build")
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


def test_the_call_fails_when_the_premise_fails_and_still_runs_the_rest(tmp_path: Path) -> None:
    run, out = _run(tmp_path, 1)
    assert run.returncode == 1
    assert run.stdout.rstrip().endswith("status 1")
    assert (out / "nonfinite_b0" / "stdout.txt").is_file()
