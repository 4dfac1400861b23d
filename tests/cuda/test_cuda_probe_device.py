"""bench/cuda_probe_device.sh finds the CLI's dependencies in C/site whether C
is named relative to the project or absolute (session 30's device call named
/tmp/C3, and every probe failed on `import tomlkit`)."""
from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_probe_device.sh"


def _stub_bin(tmp_path: Path) -> Path:
    """nvidia-smi, and a python3 that records whether the probe could import
    from each PYTHONPATH entry's site (the folder exists) and passes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'Stub GPU, 0.0'\n")
    (bin_dir / "python3").write_text(
        "#!/bin/sh\n"
        'for p in $(echo "$PYTHONPATH" | tr ":" " "); do\n'
        '  case $p in */site) [ -d "$p" ] && echo "site found: $p" || echo "site missing: $p";; esac\n'
        "done\n"
        "echo 'cuda-harness: PASS'\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("absolute", [False, True])
def test_the_probe_sees_c_site_with_c_relative_or_absolute(tmp_path: Path, absolute: bool) -> None:
    project = tmp_path / "project"
    carry = project / ".devcarry-h"
    (carry / "site").mkdir(parents=True)
    (project / "bench").mkdir()
    c = str(carry) if absolute else ".devcarry-h"
    (tmp_path / "dest").mkdir()
    env = {**os.environ, "PATH": f"{_stub_bin(tmp_path)}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", str(SCRIPT), c, str(tmp_path / "dest"), "--harness-only"],
                         cwd=project, capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    with tarfile.open(tmp_path / "dest" / "cuda_probe.tar.gz") as tar:
        reports = [m for m in tar.getmembers() if m.name.endswith(".txt") and "harness_" in m.name]
        texts = [tar.extractfile(m).read().decode() for m in reports]  # type: ignore[union-attr]
    assert len(texts) == 12
    assert all(f"site found: {carry / 'site'}" in t and "site missing" not in t for t in texts), texts[0]


def test_a_folder_that_is_not_there_is_named(tmp_path: Path) -> None:
    run = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "nowhere"), str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 2
    assert f"{tmp_path / 'nowhere'}: no such folder" in run.stderr
