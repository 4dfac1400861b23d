"""bench/cuda_qmv_split_rule_device.sh with a stand-in for qmv_bench, and
bench/cuda_qmv_split_report.py on CSVs written here: what the call times,
and the ratios and launches the report prints."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_qmv_split_rule_device.sh"
REPORT = ROOT / "bench" / "cuda_qmv_split_report.py"

STAND_IN = """#!/bin/sh
echo "$*" >> "{log}"
exit {rc}
"""

HEADER = "shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps\n"


def _bench(tmp_path: Path, rc: int = 0) -> tuple[Path, Path]:
    folder, log = tmp_path / "bx", tmp_path / "log.txt"
    folder.mkdir()
    (folder / "qmv_bench").write_text(STAND_IN.format(log=log, rc=rc))
    (folder / "qmv_bench").chmod(0o755)
    return folder, log


def _run(tmp_path: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PASSES": "2", "SHAPES": "4096,20480 5120,17408"}
    return subprocess.run(["bash", str(SCRIPT), str(folder), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def test_times_the_dispatch_beside_full_size_rings_per_pass_shape_and_dtype(tmp_path: Path) -> None:
    folder, log = _bench(tmp_path)
    run = _run(tmp_path, folder)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 2 * 2 * 2
    assert all(c.endswith("0,0,0,0,1 8,4,1,4,1,1 0,0,0,0,2 8,4,2,3,2,1 0,0,0,0,4 8,4,4,3,4,1")
               for c in calls)
    assert sum("--time 1,4,5120,17408" in c for c in calls) == 2
    assert {c.split()[1] for c in calls} == {str(tmp_path / "out" / "t1"), str(tmp_path / "out" / "t2")}


def test_a_failing_bench_fails_the_call(tmp_path: Path) -> None:
    folder, _ = _bench(tmp_path, rc=1)
    assert _run(tmp_path, folder).returncode == 1


def test_report_takes_the_fastest_pass_and_names_the_launch(tmp_path: Path) -> None:
    rows = {
        "t1": ["4096x20480,bf16,4,streamed_auto,0,0,0,0,2,30.5,1,1",
               "4096x20480,bf16,4,streamed_no_tail,8,4,2,3,2,29.0,1,1",
               "5120x17408,bf16,4,streamed_auto,0,0,0,0,4,44.8,1,1",
               "5120x17408,bf16,4,streamed_no_tail,8,4,4,3,4,42.6,1,1",
               "4096x4096,bf16,8,streamed_auto,0,0,0,0,1,7.4,1,1"],
        "t2": ["4096x20480,bf16,4,streamed_auto,0,0,0,0,2,30.0,1,1",
               "4096x20480,bf16,4,streamed_no_tail,8,4,2,3,2,29.4,1,1",
               "5120x17408,bf16,4,streamed_auto,0,0,0,0,4,45.0,1,1",
               "5120x17408,bf16,4,streamed_no_tail,8,4,4,3,4,43.0,1,1"],
    }
    for name, lines in rows.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "cuda_qmv_time.csv").write_text(HEADER + "\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, str(REPORT), str(tmp_path / "t1"), str(tmp_path / "t2")],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    lines = [line for line in out if "M=" in line]
    # The 8-bit row has no full-size pair: left out.
    assert len(lines) == 2
    m2 = next(line for line in lines if "M=2" in line)
    # 3/8 of a wave at most for these blocks (3 a multiprocessor at most, 8
    # tiles): 112 of 264 stays at full size; 4.12 waves with the last at most
    # half full take no turns (session 51).
    assert "2.42 waves, full" in m2 and "30.00" in m2 and "29.00" in m2 and "1.034" in m2
    m4 = next(line for line in lines if "M=4" in line)
    assert "4.12 waves, full" in m4 and m4.endswith("1.052")


def test_report_names_the_ring_of_other_widths(tmp_path: Path) -> None:
    lines = ["4096x14336,bf16,8,streamed_auto,0,0,0,0,8,40.0,1,1",
             "4096x14336,bf16,8,streamed_no_tail,4,2,8,6,8,44.0,1,1"]
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "cuda_qmv_time.csv").write_text(HEADER + "\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, str(REPORT), str(tmp_path / "t1")],
                         capture_output=True, text=True, check=True).stdout
    assert "4096x14336 bf16 8-bit M=8: ring (4, 2, 8, 6)" in out and out.rstrip().endswith("0.909")


def test_spec_follows_bits_and_vector_counts(tmp_path: Path) -> None:
    folder, log = _bench(tmp_path)
    env = {**os.environ, "PASSES": "1", "SHAPES": "4096,14336", "BITS": "8", "MS": "1 8"}
    run = subprocess.run(["bash", str(SCRIPT), str(folder), str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 2
    assert all("--time" in c and ",8,4096,14336 " in c and
               c.endswith("0,0,0,0,1 2,4,1,8,1,1 0,0,0,0,8 4,2,8,6,8,1") for c in calls)


def test_report_takes_no_turns_with_a_rest_of_k_or_float16_blocks_of_two(tmp_path: Path) -> None:
    lines = ["3840x15360,bf16,4,streamed_auto,0,0,0,0,4,30.0,1,1",
             "3840x15360,bf16,4,streamed_no_tail,8,4,4,3,4,30.0,1,1",
             "4096x15360,bf16,4,streamed_auto,0,0,0,0,4,30.0,1,1",
             "4096x15360,bf16,4,streamed_no_tail,8,4,4,3,4,30.0,1,1",
             "4096x40960,fp16,4,streamed_auto,0,0,0,0,2,30.0,1,1",
             "4096x40960,fp16,4,streamed_no_tail,8,4,2,3,2,30.0,1,1",
             "4096x40960,bf16,4,streamed_auto,0,0,0,0,2,30.0,1,1",
             "4096x40960,bf16,4,streamed_no_tail,8,4,2,3,2,30.0,1,1"]
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "cuda_qmv_time.csv").write_text(HEADER + "\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, str(REPORT), str(tmp_path / "t1")],
                         capture_output=True, text=True, check=True).stdout
    launches = {line.split(":")[0].strip(): line.split(":")[1].split("|")[0].strip()
                for line in out.splitlines() if "M=" in line}
    assert launches == {"3840x15360 bf16 4-bit M=4": "3.64 waves, full",
                        "4096x15360 bf16 4-bit M=4": "3.64 waves, in turn",
                        "4096x40960 fp16 4-bit M=2": "4.85 waves, full",
                        "4096x40960 bf16 4-bit M=2": "4.85 waves, in turn"}


def test_report_mirrors_the_queue_s_wave_rules() -> None:
    """cuda_qmv_split_report.launch as qmv_streamed_full_blocks and
    qmv_streamed_takes_turns decide (session 51), on H100/H200's 132
    multiprocessors."""
    sys.path.insert(0, str(ROOT / "bench"))
    import cuda_qmv_split_report as report

    cases = {
        # (dtype, k, n, m): launch
        ("bf16", 8192, 20480, 2): "2.42 waves, last 112 split",  # 16 tiles: half a wave
        ("bf16", 4096, 17920, 2): "2.12 waves, last 32 split",  # 0.12 of a wave
        ("bf16", 4096, 22016, 2): "2.61 waves, full",  # 2 vectors, 61% full: no turns
        ("bf16", 4096, 40960, 2): "4.85 waves, in turn",
        ("bf16", 4096, 20480, 4): "4.85 waves, in turn",
        ("bf16", 4096, 21504, 4): "5.09 waves, full",  # 1 block a multiprocessor: no split
        ("bf16", 4096, 30720, 4): "7.27 waves, in turn",
        ("bf16", 4096, 12288, 4): "2.91 waves, in turn",
        ("bf16", 5120, 13824, 1): "1.09 waves, last 36 split",
    }
    for (dtype, k, n, m), want in cases.items():
        assert report.launch(dtype, k, n, m, 132) == want, (dtype, k, n, m)
    assert report.takes_turns(264, 4 * 264 - 1, 8) and not report.takes_turns(264, 4 * 264 + 10, 4)
    assert report.takes_turns(396, 2 * 396 + 300, 2) and not report.takes_turns(396, 2 * 396 + 270, 2)


def test_report_s_blocks_per_multiprocessor() -> None:
    """The rings' blocks per multiprocessor as the occupancy query counts
    them: the registers bind for the dispatch's 4-bit rings (3, 2, 1), and
    a ring whose shared memory would not fit that many gets fewer."""
    sys.path.insert(0, str(ROOT / "bench"))
    import cuda_qmv_split_report as report

    assert [report.blocks_per_sm(r) for r in report.REGISTERS] == [3, 2, 1]
    # 4 stages of 1 vector: 512 * 2 bytes of x, 32 rows of 256 bytes of w and
    # 2 x 32 rows of 16 bytes of scales and biases a stage.
    assert report.ring_bytes((8, 4, 1, 4)) == 4 * (1024 + 8192 + 1024)
    assert report.blocks_per_sm((8, 4, 2, 2)) is None
    report.REGISTERS[(8, 8, 8, 6)] = 64  # 4 blocks by registers
    try:
        big = report.ring_bytes((8, 8, 8, 6))
        assert big > report.SM_SHARED // 4
        assert report.blocks_per_sm((8, 8, 8, 6)) == report.SM_SHARED // (big + 1024)
    finally:
        del report.REGISTERS[(8, 8, 8, 6)]
    # 81 registers are allocated as 88: 5 warps in each quarter of the file,
    # 20 warps, 2 blocks of 8 (65536 / (81 x 256) would say 3).
    report.REGISTERS[(8, 4, 1, 5)] = 81
    try:
        assert report.blocks_per_sm((8, 4, 1, 5)) == 2
    finally:
        del report.REGISTERS[(8, 4, 1, 5)]
