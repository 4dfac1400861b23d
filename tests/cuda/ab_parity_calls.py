"""What the device scripts that time a build against the queue's and then
check it (bench/cuda_qmv_half_wave_device.sh, cuda_qmv_wave_rule_device.sh)
must have called after their first part, read from conftest.py's
logging_build log."""
from __future__ import annotations

import subprocess
from pathlib import Path


def assert_ab_then_parity(calls: list[str], bx: Path, by: Path, out: Path,
                          run: subprocess.CompletedProcess[str]) -> None:
    """Part 2: the A/B times both builds and its report compares them; part
    3: BY's parity at 4 and 8 bits, the ragged sweep and the matrix."""
    ab = [c for c in calls if "/out/ab/" in c]
    assert {c.split()[0] for c in ab} == {f"{bx}/qmv_bench", f"{by}/qmv_bench"}
    assert "4096x4096 bf16 4-bit M= 2" in (out / "ab" / "report.txt").read_text()
    parity = [c for c in calls if "--quick" in c or "qmv_matrix" in c]
    assert parity and all(c.startswith(str(by)) for c in parity)
    assert any("--bits 4" in c for c in parity) and any("--bits 8" in c for c in parity)
    assert any("--ragged" in c for c in parity) and any("qmv_matrix" in c for c in parity)
    assert "part 3 (parity)" in run.stdout


def assert_failed_part_keeps_the_rest(log: Path, by: Path, part1: str,
                                      run: subprocess.CompletedProcess[str]) -> None:
    """A failing BX fails the call; part 1 says so and BY's parity still
    ran."""
    assert run.returncode == 1
    assert part1 in run.stdout and "status 1" in run.stdout
    assert "part 3 (parity)" in run.stdout
    assert any(c.startswith(str(by)) and "--quick" in c for c in log.read_text().splitlines())
