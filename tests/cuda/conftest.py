"""The CUDA harness tests import bench/cuda_qmv.py; `pinned_checkout` is the
core fixture of tests/conftest.py. The device scripts' tests share a
stand-in qmv_bench and the environment of a device run."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

# A stand-in for the harness's qmv_bench in the device scripts' tests: --quick
# prints a verdict; --time writes a stock row and one row per configuration
# (the dispatch's time is the build's SPEED, qmm_sm80 50 us, stock 30).
STUB_QMV_BENCH = """#!/bin/bash
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


@pytest.fixture
def stub_build() -> Callable[..., Path]:
    """Makes FOLDER a stand-in build: STUB_QMV_BENCH with the dispatch at
    SPEED us, and each further program NAME=TEXT given."""

    def make(folder: Path, speed: int, **programs: str) -> Path:
        folder.mkdir(parents=True)
        programs["qmv_bench"] = STUB_QMV_BENCH.replace("SPEED", str(speed))
        for name, text in programs.items():
            (folder / name).write_text(text)
            (folder / name).chmod(0o755)
        return folder

    return make


# A stand-in for qmv_bench and qmv_matrix that logs its arguments to LOG
# ("$0 $*", a line a call), writes a CSV row where --out names a folder (as
# qmv_bench --time does, so that the A/B's report has something to read),
# prints a parity verdict and exits with RC.
LOGGING_QMV_BENCH = """#!/bin/sh
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


@pytest.fixture
def logging_build() -> Callable[..., Path]:
    """Makes FOLDER a stand-in build whose qmv_bench and qmv_matrix are
    LOGGING_QMV_BENCH, logging to LOG and exiting with RC."""

    def make(folder: Path, log: Path, rc: int = 0) -> Path:
        folder.mkdir()
        for name in ("qmv_bench", "qmv_matrix"):
            (folder / name).write_text(LOGGING_QMV_BENCH.format(log=log, rc=rc))
            (folder / name).chmod(0o755)
        return folder

    return make


@pytest.fixture
def run_script(device_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs a device script with ARGS from the project root in device_env
    (and the further variables given)."""

    def run(script: Path, *args: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(script), *map(str, args)], capture_output=True, text=True,
                              env={**device_env, **env}, cwd=ROOT, timeout=300)

    return run


@pytest.fixture
def device_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a device script run here: an nvidia-smi that names
    an H200 first on PATH, Nsight Compute left out."""
    bin_dir = tmp_path / "device-bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho H200\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NCU": "0"}
