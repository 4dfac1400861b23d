"""bench/cuda_qmv_configs_8bit_device.sh, every 8-bit ring against the
dispatch's pick, run here with a stand-in for the harness."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_configs_8bit_device.sh"

# qmv_bench --time: the dispatch takes 100 us, qmm_sm80 50, a ring
# W * 1000 + R * 100 + V * 10 + D (so the fastest is the one with the
# smallest W, R, V, D in that order); FAIL_AT makes one ring fail. At M = 1
# it also writes the read roofline's row (a copy kernel's W, R, V, D), as
# the harness does, faster than any ring.
BENCH = """#!/bin/bash
out=$2; spec=$4; shift 4
IFS=, read -r dt bits k n <<< "$spec"
f=$out/cuda_qmv_time.csv
[ -s "$f" ] || echo "shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps" > "$f"
d=$([ "$dt" = 0 ] && echo bf16 || echo fp16)
rc=0
for c in "$@"; do
  IFS=, read -r W R V D M <<< "$c"
  if [ "$W" = sm80 ]; then echo "${k}x${n},$d,$bits,qmm_sm80,0,0,0,0,$R,50,0,0" >> "$f"; continue; fi
  if [ "$W" = 0 ]; then
    [ "$M" = 1 ] && echo "${k}x${n},$d,$bits,read_roofline,4,512,4,0,1,10,0,0" >> "$f"
    echo "${k}x${n},$d,$bits,streamed_auto,0,0,0,0,$M,100,0,0" >> "$f"; continue
  fi
  us=$((W * 1000 + R * 100 + V * 10 + D))
  [ "$c" = "${FAIL_AT:-}" ] && { us=-1; rc=1; }
  echo "${k}x${n},$d,$bits,streamed,$W,$R,$V,$D,$M,$us,0,0" >> "$f"
done
exit $rc
"""


def run_with_bench(tmp_path: Path, env: dict[str, str], script: Path = SCRIPT,
                   **extra: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """script (a device script taking C OUT) run with BENCH as C's qmv_bench;
    its run and OUT/report.txt."""
    c = tmp_path / "c"
    c.mkdir()
    (c / "qmv_bench").write_text(BENCH)
    (c / "qmv_bench").chmod(0o755)
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(script), str(c), str(out)], capture_output=True, text=True,
                         env={**env, **extra}, cwd=ROOT, timeout=600)
    # What comes back from the device: at most 8 files.
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 8
    return run, (out / "report.txt").read_text()


def test_each_product_gets_its_fastest_ring_beside_the_dispatch_and_qmm_sm80(
        tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = report.splitlines()[1:]
    # Three shapes, two types, four M.
    assert len(lines) == 24
    # M = 4 takes rings of 2 and 4 vectors, M = 8 of 2, 4 and 8, M = 16 of
    # 4, 8 and 16: the smallest W, R, V, D among them.
    assert "4096x14336 fp16 M= 4:  100.00 |   2,2,4,8 2248.00 (22.480) |   50.00" in lines
    assert "4096x14336 bf16 M= 8:  100.00 |   2,2,4,8 2248.00 (22.480) |   50.00" in lines
    assert "4096x4096 fp16 M=16:  100.00 |   2,2,4,8 2248.00 (22.480) |   50.00" in lines
    # Both passes timed every ring: its median is of two rows.
    csv = (tmp_path / "out" / "t0" / "cuda_qmv_time.csv").read_text()
    assert csv.count("4096x14336,fp16,8,streamed,4,1,16,2,16,") == 2
    assert "4,1,16,2,8," not in csv and "2,4,2,8,12," not in csv


def test_a_failed_ring_fails_the_call_and_is_left_out_of_the_report(
        tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, FAIL_AT="2,2,4,8,4")
    assert run.returncode == 1
    assert run.stdout.rstrip().endswith("status 1")
    assert "4096x14336 fp16 M= 4:  100.00 |   2,4,2,8 2428.00 (24.280) |   50.00" in report


def test_ms_1_times_the_one_vector_rings_only(tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, MS="1")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = report.splitlines()[1:]
    assert len(lines) == 6
    assert "4096x14336 fp16 M= 1:  100.00 |   2,4,1,8 2418.00 (24.180) |   50.00" in lines
    csv = (tmp_path / "out" / "t0" / "cuda_qmv_time.csv").read_text()
    assert csv.count("4096x4096,bf16,8,streamed,16,2,1,4,1,") == 2
    assert {row.split(",")[8] for row in csv.splitlines()[1:]} == {"1"}
    # The read roofline's row is not a ring.
    assert "read_roofline" in csv and "4,512,4,0" not in report


def test_ms_2_times_the_rings_of_one_and_two_vectors(tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, MS="2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = report.splitlines()[1:]
    assert len(lines) == 6
    assert "4096x14336 bf16 M= 2:  100.00 |   2,4,1,8 2418.00 (24.180) |   50.00" in lines
    csv = (tmp_path / "out" / "t0" / "cuda_qmv_time.csv").read_text()
    assert csv.count("4096x4096,fp16,8,streamed,16,2,2,2,2,") == 2
    assert csv.count("4096x4096,fp16,8,streamed,8,4,1,4,2,") == 2
    assert ",4,4,4,4,2," not in csv


def test_an_m_without_rings_is_refused(tmp_path: Path, device_env: dict[str, str]) -> None:
    c = tmp_path / "c"
    c.mkdir()
    run = subprocess.run(["bash", str(SCRIPT), str(c), str(tmp_path / "out")], capture_output=True,
                         text=True, env={**device_env, "MS": "3"}, cwd=ROOT, timeout=60)
    assert run.returncode == 2
    assert "no rings for M = 3" in run.stderr


def test_bits_4_times_the_4_bit_rings_of_up_to_four_vectors(tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, MS="2 4", BITS="4")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = report.splitlines()[1:]
    assert len(lines) == 12
    assert "4096x14336 bf16 M= 2:  100.00 |   2,4,1,8 2418.00 (24.180) |   50.00" in lines
    csv = (tmp_path / "out" / "t0" / "cuda_qmv_time.csv").read_text()
    assert {row.split(",")[2] for row in csv.splitlines()[1:]} == {"4"}
    assert csv.count("4096x4096,fp16,4,streamed,8,4,2,3,2,") == 2


def test_bits_4_past_four_vectors_is_refused(tmp_path: Path, device_env: dict[str, str]) -> None:
    c = tmp_path / "c"
    c.mkdir()
    run = subprocess.run(["bash", str(SCRIPT), str(c), str(tmp_path / "out")], capture_output=True,
                         text=True, env={**device_env, "MS": "4 8", "BITS": "4"}, cwd=ROOT, timeout=60)
    assert run.returncode == 2
    assert "no rings for 4 bits at M = 8" in run.stderr
