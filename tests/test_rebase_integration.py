"""Rehearse a real pin bump of the real queue (never skipped: see conftest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import sh_git
from overlay_tool.drift import collect
from overlay_tool.emulator import Emulator
from overlay_tool.emulator.parity import sweep
from overlay_tool.project import Project
from overlay_tool.rebase import Rebaser, state_dir
from overlay_tool.replay import APPLIED

pytestmark = pytest.mark.integration

TARGET = "846d176227a0ac13d2667e58d2bb68b322109ab0"  # 2026-08-22; touches mlx/backend/metal/quantized.cpp


def test_real_bump_to_846d176_in_a_scratch_copy(project: Project, upstream_cache: object, tmp_path: Path) -> None:
    pin_before = project.pin_path.read_bytes()
    root = tmp_path / "copy"
    root.mkdir()
    shutil.copy(project.pin_path, root / "pin.toml")
    shutil.copytree(project.patches_dir, root / "patches")
    copy = Project.discover(root)
    names = copy.series.names

    drift = collect(copy, TARGET, log=lambda _: None)
    assert drift.applies, drift.rows
    assert drift.behind > 0

    lines: list[str] = []
    Rebaser(copy, log=lines.append).start(TARGET)
    text = "\n".join(lines)
    assert "rebase 9a795735 -> 846d1762: done" in text or f"-> {TARGET[:8]}: done" in text
    results = {f.split()[0]: f.split()[2] for f in text.splitlines()
               if f.strip().split(" ")[0] in names and len(f.split()) >= 3}
    assert set(results) == set(names) and all(r in APPLIED for r in results.values()), results
    assert "range-diff" in text and "re-export unchanged" in text  # check ran on the new pin
    assert copy.pin.commit == TARGET
    pin_text = (root / "pin.toml").read_text()
    assert "# The upstream commit the patch queue" in pin_text  # comments kept
    assert f'# v0.32.1-26, 2026-08-22\ncommit = "{TARGET}"' in pin_text  # the note names the new pin
    assert sh_git(copy.work_dir, "rev-parse", "refs/overlay/base") == TARGET
    assert not state_dir(copy).exists()
    assert project.pin_path.read_bytes() == pin_before  # the real pin.toml is left alone

    # The parity proof still holds on the rebased queue: every streamed row
    # equals the M = 1 kernel's on the bumped header, and the negative control
    # (stock qmv_wide) still differs there.
    emu = Emulator(copy.work_dir / "mlx/backend/metal/kernels/quantized.h")
    streamed = sweep(emu, "qmv_streamed", ms=range(2, 7))
    assert streamed.compared and not streamed.differing, streamed.mismatches[:5]
    wide = sweep(emu, "qmv_wide", ms=range(2, 7))
    assert wide.share > 0.5, f"qmv_wide differs in only {wide.share:.0%} of outputs"


def test_upstream_pr_on_the_real_queue(project: Project, upstream_cache: object, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The real queue's upstream patches: a series on the bump target that passes MLX's formatting.

    With no patch marked upstream (the queue before the kernel lands) it must refuse, saying so.
    """
    from overlay_tool.errors import QueueDoesNotApply
    from overlay_tool.patchfile import PatchFile
    from overlay_tool.upstream_pr import upstream_pr

    root = tmp_path / "copy"
    root.mkdir()
    shutil.copy(project.pin_path, root / "pin.toml")
    shutil.copytree(project.patches_dir, root / "patches")
    copy = Project.discover(root)
    upstream = [e.name for e in copy.series.entries if e.kind == "upstream"]
    if not upstream:
        with pytest.raises(QueueDoesNotApply, match="no patch is marked upstream"):
            upstream_pr(copy, TARGET, log=lambda _: None)
        return
    lines: list[str] = []
    result = upstream_pr(copy, TARGET, tmp_path / "out", log=lines.append)
    assert len(result.files) == len(upstream) and not result.problems
    assert (f"note: these {len(upstream)} patches change the cuda, metal backends; MLX reviews each on its own: "
            f"--only PATCH makes a PR of some of them") in lines
    assert (tmp_path / "out" / "PR.md").is_file()
    # One PR per backend: the CUDA patches and the Metal ones each apply and
    # pass alone (no hunk of one touches lines the other introduced).
    # A patch's backend is the one its paths name (not its title, which git
    # cuts to 52 characters in the file name).
    def is_cuda(name: str) -> bool:
        return any("/cuda/" in f.path for f in PatchFile.read(copy.patches_dir / name).files)

    by_backend = {"cuda": [n for n in upstream if is_cuda(n)], "metal": [n for n in upstream if not is_cuda(n)]}
    for backend, only in by_backend.items():
        picked = upstream_pr(copy, TARGET, tmp_path / backend, only=only, log=lambda _: None)
        paths = {f.path for p in picked.files for f in PatchFile.read(p).files}
        assert picked.files and not picked.problems, backend
        assert all(f"/{backend}/" in p or p.startswith("python/tests/") for p in paths), (backend, paths)
        assert len(picked.files) == len(only), backend
