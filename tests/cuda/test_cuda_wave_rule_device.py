"""bench/cuda_qmv_wave_rule_device.sh, run here with stand-ins for the
harness binaries: which build each part calls, with which arguments, and
that a failing part fails the call without stopping the parts after it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_wave_rule_device.sh"

# Logs its arguments, and writes a CSV row where --out names a folder (as
# qmv_bench --time does), so that the A/B's report has something to read.
STAND_IN = """#!/bin/sh
echo "$0 $*" >> "{log}"
out=""
while [ $# -gt 0 ]; do
  [ "$1" = --out ] && out=$2
  shift
done
if [ -n "$out" ]; then
  mkdir -p "$out"
  [ -f "$out/cuda_qmv_time.csv" ] || echo "shape,dtype,bits,impl,W,R,V,D,M,us" > "$out/cuda_qmv_time.csv"
  echo "4096x4096,bf16,4,streamed_auto,0,0,0,0,2,5.0" >> "$out/cuda_qmv_time.csv"
  echo "4096x4096,bf16,4,stock_qmv,0,0,0,0,2,9.0" >> "$out/cuda_qmv_time.csv"
fi
echo "PARITY OK (stand-in)"
exit {rc}
"""


def _build(folder: Path, log: Path, rc: int = 0) -> Path:
    folder.mkdir()
    for name in ("qmv_bench", "qmv_matrix"):
        (folder / name).write_text(STAND_IN.format(log=log, rc=rc))
        (folder / name).chmod(0o755)
    return folder


def _call(tmp_path: Path, bx: Path, bz: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "R_SHAPES": "4096,14336", "R_MS": "4 8", "SHAPES": "4096,4096",
           "R_S": "30", "AB_S": "30", "PARITY_S": "30"}
    return subprocess.run(["bash", str(SCRIPT), str(bx), str(bz), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_times_the_dispatch_on_bx_then_the_ab_then_bz_s_parity(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    bx, bz = _build(tmp_path / "bx", log), _build(tmp_path / "bz", log)
    run = _call(tmp_path, bx, bz)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = log.read_text().splitlines()
    # Part 1: BX alone, 8-bit rings at full size beside the dispatch, two
    # passes, bfloat16 and float16.
    rings = [c for c in calls if "/out/r/" in c]
    assert len(rings) == 4 and all(c.startswith(f"{bx}/qmv_bench") for c in rings)
    assert all(",8,4096,14336 0,0,0,0,4 2,4,4,6,4,1 0,0,0,0,8 4,2,8,6,8,1" in c for c in rings)
    # Part 2: the A/B times both builds; its report compares them.
    ab = [c for c in calls if "/out/ab/" in c]
    assert {c.split()[0] for c in ab} == {f"{bx}/qmv_bench", f"{bz}/qmv_bench"}
    assert "4096x4096 bf16 4-bit M= 2" in (tmp_path / "out" / "ab" / "report.txt").read_text()
    # Part 3: BZ's parity, at 4 and 8 bits, the ragged sweep and the matrix.
    parity = [c for c in calls if "--quick" in c or "qmv_matrix" in c]
    assert parity and all(c.startswith(str(bz)) for c in parity)
    assert any("--bits 4" in c for c in parity) and any("--bits 8" in c for c in parity)
    assert any("--ragged" in c for c in parity) and any("qmv_matrix" in c for c in parity)
    assert "part 3 (parity)" in run.stdout


def test_a_failing_build_fails_the_call_and_the_later_parts_still_run(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    bx, bz = _build(tmp_path / "bx", log, rc=1), _build(tmp_path / "bz", log)
    run = _call(tmp_path, bx, bz)
    assert run.returncode == 1
    assert "part 1 (dispatch and full size)" in run.stdout and "status 1" in run.stdout
    assert "part 3 (parity)" in run.stdout
    assert any(c.startswith(str(bz)) and "--quick" in c for c in log.read_text().splitlines())
