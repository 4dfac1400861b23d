"""bench/cuda_qmv_rings_4bit_device.sh, the 4-bit rings of two and four
vectors against the dispatch, run here with a stand-in for the harness."""
from __future__ import annotations

from pathlib import Path

from tests.cuda.test_cuda_configs_8bit import ROOT, run_with_bench

SCRIPT = ROOT / "bench" / "cuda_qmv_rings_4bit_device.sh"


def test_each_ring_is_given_over_the_dispatch_at_its_m(tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, SCRIPT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = report.splitlines()
    # The three shapes, two types; at M = 2 the dispatch and six
    # rings, at M = 4 the dispatch and seven. Stock and the roofline are
    # left out.
    assert len(lines) == 3 * 2 * (7 + 8)
    assert "4096x14336 bf16 M=2 (8,4,2,3): 8423.00 us, 84.230 of the dispatch" in lines
    assert "14336x4096 fp16 M=4 (2,2,4,8): 2248.00 us, 22.480 of the dispatch" in lines
    assert "4096x4096 fp16 M=2 (auto): 100.00 us, 1.000 of the dispatch" in lines
    assert not [line for line in lines if "M=1" in line]
    assert "status 0" in run.stdout


def test_a_ring_that_fails_fails_the_run_and_keeps_the_rest(tmp_path: Path, device_env: dict[str, str]) -> None:
    run, report = run_with_bench(tmp_path, device_env, SCRIPT, FAIL_AT="4,4,2,4,2", SHAPES="4096,4096")
    assert run.returncode == 1
    assert "status 1" in run.stdout
    lines = report.splitlines()
    assert len(lines) == 2 * (7 + 8)
    assert "4096x4096 bf16 M=2 (4,4,2,4): failed" in lines
    assert "4096x4096 bf16 M=2 (4,2,2,8): 4228.00 us, 42.280 of the dispatch" in lines
