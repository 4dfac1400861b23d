"""bench/cuda_promote_cost.cu and its device script: the tile loop of
float16 8-bit blocks of 8 vectors alone, its promotion and the order of its
multiply-adds (session 40). The script runs here with stand-ins; where nvcc
exists the program is compiled and its loops read."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import cuda_sass  # bench/cuda_sass.py (conftest puts bench/ on sys.path)

from .test_cuda_sass import _sass_or_skip

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_promote_cost_device.sh"
SOURCE = ROOT / "bench" / "cuda_promote_cost.cu"


def _stand_ins(tmp_path: Path, rc: int) -> tuple[Path, Path, Path]:
    """A promote_cost that logs its arguments and exits with rc, and an ncu
    that logs its own and runs the program."""
    log = tmp_path / "calls.txt"
    c = tmp_path / "c"
    c.mkdir()
    (c / "promote_cost").write_text(f'#!/bin/sh\necho "promote_cost $*" >> {log}\necho "RESULT: ok"\nexit {rc}\n')
    bin_dir = tmp_path / "ncu-bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(
        "#!/bin/bash\n"
        '[ "$1" = --version ] && { echo "Version 0"; exit 0; }\n'
        f'echo "ncu $*" >> {log}\n'
        'while [ "${1#/}" = "$1" ]; do shift; done; "$@" > /dev/null\n'
        "echo '\"ID\",\"Duration\"'\n")
    for f in (c / "promote_cost", bin_dir / "ncu"):
        f.chmod(0o755)
    return c, bin_dir, log


def test_the_call_times_twice_then_profiles_at_two_warps_and_samples_three_modes(
        tmp_path: Path, run_script: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    c, bin_dir, log = _stand_ins(tmp_path, 0)
    out = tmp_path / "out"
    proc = run_script(SCRIPT, c, out, NCU="1", PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    calls = log.read_text().splitlines()
    assert calls[:2] == ["promote_cost 4096", "promote_cost 4096"]
    ncu = [line for line in calls if line.startswith("ncu ")]
    assert len(ncu) == 4 and all(line.endswith("promote_cost 4096 2") for line in ncu)
    assert "stalled_dispatch_stall_per_issue_active" in ncu[0]
    # Launches go mode 0, 1, 2, 3 (each a warm-up, then the timed one): the
    # samples are of the timed launches of modes 1, 2 and 3.
    assert [re.search(r"--launch-skip (\d+)", line).group(1) for line in ncu[1:]] == ["3", "5", "7"]
    assert {p.name for p in out.iterdir()} >= {"time_1.txt", "time_2.txt", "ncu.csv", "src_1.csv", "src_3.csv"}


def test_without_nsight_only_the_times_and_a_failed_run_fails_the_call(
        tmp_path: Path, run_script: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    c, _, log = _stand_ins(tmp_path, 1)
    out = tmp_path / "out"
    proc = run_script(SCRIPT, c, out)  # device_env: NCU=0
    assert proc.returncode == 1
    assert log.read_text().splitlines() == ["promote_cost 4096", "promote_cost 4096"]
    assert not (out / "ncu.csv").exists()


@pytest.mark.integration
def test_the_program_compiles_and_only_the_ordered_fmas_read_w_from_the_reuse_cache(tmp_path: Path) -> None:
    """The premise of the queue's order of multiply-adds, in the program's
    SASS: mode 3's fmas (the tile's order) read all three operands from the
    register file, mode 4's (vectors innermost) mostly share w's element;
    mode 1 promotes x and w with 20 mmas a tile."""
    nvcc = shutil.which(os.environ.get("NVCC", "nvcc"))
    if not nvcc:
        pytest.skip("nvcc not found: the program is not compiled here")
    exe = tmp_path / "promote_cost"
    subprocess.run([nvcc, "-O3", "-gencode=arch=compute_90a,code=sm_90a", str(SOURCE), "-o", str(exe)],
                   check=True, capture_output=True)
    loops = {}
    for k in _sass_or_skip(exe):
        if k.name.startswith("void tile_loop<"):
            (ring,) = [lp for lp in cuda_sass.loops(k) if lp.opcodes()["FFMA"] == 128]
            loops[int(k.name[len("void tile_loop<")])] = ring
    assert sorted(loops) == [0, 1, 2, 3, 4, 5]
    reused_3, _ = loops[3].reusing("FFMA")
    reused_4, _ = loops[4].reusing("FFMA")
    assert reused_3 < 8 and reused_4 >= 100, (reused_3, reused_4)
    assert loops[1].opcodes()["HMMA.1688.F32"] == 20
    assert loops[2].opcodes()["HADD2.F32"] == 80
