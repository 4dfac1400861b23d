"""bench/cuda_qmv_rings_m1_m2_device.sh and bench/cuda_qmv_rings_report.py:
the 8-bit rings of one and two vectors against the dispatch, run here with
a stand-in for the harness."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cuda.test_cuda_configs_8bit import run_with_bench

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_rings_m1_m2_device.sh"
REPORT = ROOT / "bench" / "cuda_qmv_rings_report.py"

HEADER = "shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps\n"


def _csv(path: Path, rows: list[str]) -> Path:
    path.write_text(HEADER + "".join(r + ",0,0\n" for r in rows))
    return path


def test_the_rule_is_compared_with_blocks_of_8_rows_where_it_takes_16(tmp_path: Path) -> None:
    rows = []
    for jitter in (0.0, 0.2, 9.0):  # the third pass is an outlier
        for shape, n_new, n_old in (("4096x6144", 11.0, 12.0), ("4096x14336", 25.0, 24.0)):
            rows += [f"{shape},bf16,8,streamed_auto,0,0,0,0,1,{n_old + jitter}",
                     f"{shape},bf16,8,streamed,4,4,1,4,1,{n_new + jitter}",
                     f"{shape},bf16,8,streamed,2,4,1,8,1,{n_old + jitter}",
                     f"{shape},bf16,8,read_roofline,4,512,4,0,1,1.0",
                     f"{shape},bf16,8,stock_qmv,0,0,0,0,1,40.0"]
    run = subprocess.run([sys.executable, str(REPORT), str(_csv(tmp_path / "t.csv", rows))],
                         capture_output=True, text=True, check=True)
    out = run.stdout
    # Medians of three passes; the read roofline and stock are not rings.
    assert "4096x6144   bf16 M=1: dispatch   12.20 us | 4,4,1,4 0.918 2,4,1,8 1.000" in out
    assert "read_roofline" not in out and "4,512,4,0" not in out
    # 4096 < N <= 10240 takes blocks of 16 rows for one vector, 14336 not.
    assert "4096x6144   bf16 M=1:   12.20 ->   11.20 us (0.918)" in out
    assert "4096x14336  bf16 M=1:   24.20" not in out
    assert "M=1: 1 products, 0.918-0.918, geometric mean 0.918" in out


def test_an_empty_csv_is_an_error(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(REPORT), str(_csv(tmp_path / "t.csv", []))],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "no dispatch rows" in run.stdout


def test_the_sweep_times_37_shapes_at_m_1_and_2_and_keeps_8_files(
        tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, SCRIPT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.rstrip().endswith("status 0")
    # 37 shapes, two types, M = 1 and 2.
    assert report.count(" M=1: dispatch") == 74 and report.count(" M=2: dispatch") == 74
