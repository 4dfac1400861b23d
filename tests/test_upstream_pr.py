"""upstream-pr on throwaway repositories: dependency refusal, MLX formatting, the series and PR.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Toy, sh_git, write_files
from overlay_tool.apply import apply_queue
from overlay_tool.cli import main
from overlay_tool.errors import ConfigError, FormatError, QueueDoesNotApply
from overlay_tool.export import export_queue
from overlay_tool.project import Project
from overlay_tool import upstream_pr as upstream_pr_mod
from overlay_tool.upstream_pr import precommit_hooks, tool_versions, tools_dir, upstream_pr

PRECOMMIT = """repos:
-   repo: https://github.com/pre-commit/mirrors-clang-format
    rev: v21.1.8
    hooks:
    -   id: clang-format
        files: \\.(h|cpp)$
# Using this mirror lets us use mypyc-compiled black
-   repo: https://github.com/psf/black-pre-commit-mirror
    rev: 26.1.0
    hooks:
    -   id: black

-   repo: https://github.com/pycqa/isort
    rev: 7.0.0
    hooks:
    -   id: isort
        args:
            - --profile=black
"""
CPP = "int twice(int x) {\n  return 2 * x;\n}\n"
PY = "x = [1,2]  # upstream's own formatting slip, not ours\n\n\ndef twice(x):\n    return 2 * x\n"


def quiet(_: str) -> None:
    pass


@pytest.fixture(scope="session")
def user_tools_dir() -> str:
    """The user's own formatter venvs (read before the per-test isolation changes the environment).

    Session-scoped fixtures are set up before function-scoped ones, so this sees
    the real $MLX_OVERLAY_TOOLS / cache: a second run reuses the PyPI install.
    """
    return str(tools_dir())


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch, user_tools_dir: str) -> None:
    monkeypatch.setenv("MLX_OVERLAY_TOOLS", user_tools_dir)


def set_kinds(project: Project, kinds: dict[str, str]) -> None:
    text = project.series_path.read_text()
    for name, kind in kinds.items():
        text = text.replace(f"{name} overlay", f"{name} {kind}").replace(f"{name} upstream", f"{name} {kind}")
    project.series_path.write_text(text)


def test_precommit_versions_are_read() -> None:
    hooks = precommit_hooks(PRECOMMIT)
    assert tool_versions(hooks) == {"clang-format": "21.1.8", "black": "26.1.0", "isort": "7.0.0"}
    assert hooks["isort"].args == ["--profile=black"]
    assert hooks["clang-format"].files == r"\.(h|cpp)$"


def test_refuses_upstream_patch_that_needs_an_overlay_patch(toy_queue: Toy) -> None:
    toy_queue.add_patch("src/a.txt", "added to a\n", "added to a, then improved\n",
                        "Improve a\n\nBuilds on the overlay line.")
    export_queue(toy_queue.project, log=quiet)
    set_kinds(toy_queue.project, {"0002-Change-b.patch": "upstream", "0003-Improve-a.patch": "upstream"})
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply, match=r"refusing: 0003-Improve-a.patch \(upstream\) depends on "
                                                r"0001-Change-a.patch \(overlay\).*src/a.txt"):
        upstream_pr(toy_queue.project, "main", log=lines.append)
    text = "\n".join(lines)
    assert "without the patch(es) before it left out of the PR that change that file: 0001-Change-a.patch" in text
    assert "0002-Change-b.patch (upstream) depends" not in text
    assert not (toy_queue.project.root / "dist" / "upstream-pr").exists()


@pytest.fixture
def mlx_like(tmp_path: Path, make_repo: Callable[..., Path], tools: None) -> Toy:
    """A toy upstream with MLX's formatting config and one C++ and one Python file."""
    upstream = make_repo("upstream", {
        ".pre-commit-config.yaml": PRECOMMIT,
        ".clang-format": "BasedOnStyle: LLVM\n",
        "mlx/k.cpp": CPP, "python/tests/test_k.py": PY, "README": "toy\n",
    })
    commit = sh_git(upstream, "rev-parse", "HEAD")
    root = tmp_path / "project"
    write_files(root, {
        "pin.toml": f'[upstream]\nurl = "{upstream}"\ncommit = "{commit}"\nbranch = "main"\n',
        "patches/series": "# queue\n\n",
        "docs/benchmarks.md": "# Benchmarks\n\n| M | main | PR |\n|---|---|---|\n| 4 | 10 | 5 |\n",
    })
    toy = Toy(project=Project.discover(root), upstream=upstream)
    apply_queue(toy.project, log=quiet)
    return toy


def queue(toy: Toy, cpp_line: str, py_line: str) -> None:
    toy.add_patch("README", "toy\n", "toy (overlay build)\n", "Mark the overlay build\n\nOverlay only.")
    toy.add_patch("mlx/k.cpp", CPP, CPP + cpp_line, "Add thrice\n\nA kernel helper.")
    toy.add_patch("python/tests/test_k.py", PY, PY + py_line, "Test thrice\n\nFails on main.")
    export_queue(toy.project, log=quiet)
    set_kinds(toy.project, {"0002-Add-thrice.patch": "upstream", "0003-Test-thrice.patch": "upstream"})


def test_clean_series_pr_md_and_branch(mlx_like: Toy) -> None:
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    lines: list[str] = []
    result = upstream_pr(mlx_like.project, "main", log=lines.append)
    out = mlx_like.project.root / "dist" / "upstream-pr"
    assert sorted(p.name for p in out.iterdir()) == ["0001-Add-thrice.patch", "0002-Test-thrice.patch", "PR.md"]
    assert b"README" not in (out / "0001-Add-thrice.patch").read_bytes()
    pr = (out / "PR.md").read_text()
    assert pr.startswith("# Add thrice (+1 more)")
    assert "A kernel helper." in pr and "Fails on main." in pr
    assert "Parity tests: not run" in pr and "| 4 | 10 | 5 |" in pr
    assert "`python/tests/test_k.py`" in pr and "not written yet" in pr
    assert any("format: 3 check(s) of the changed files clean" in line for line in lines)
    assert any("python/tests/test_k.py: black would also change 1 place(s) the patches do not touch" in line
               for line in lines)
    work = mlx_like.project.root / "work" / "upstream-pr"
    assert sh_git(work, "rev-parse", "HEAD") == result.branch_head
    assert sh_git(work, "log", "--format=%s", "HEAD~2..HEAD").splitlines() == [
        "Test thrice", "Add thrice"]


def test_badly_formatted_hunks_are_reported(mlx_like: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    queue(mlx_like, "int  thrice( int x ){return 3*x;}\n",
          "\n\nimport sys\nimport os\n\n\ndef thrice( x ):\n    return [3*x ,x, os, sys]\n")
    summary = mlx_like.project.root / "summary.json"
    summary.write_text('{"ok": true, "backend": "cpu", "device": "cpu", "mlx": "0.0", "suites": '
                       '[{"name": "parity", "backend": "cpu", "passed": 7, "failed": 0, "errors": 0, "skipped": 1}]}')
    rc = main(["-C", str(mlx_like.project.root), "upstream-pr", "--onto", "main", "--parity", str(summary)])
    captured = capsys.readouterr()
    assert rc == FormatError.exit_code
    assert "mlx/k.cpp: clang-format 21.1.8 would change" in captured.out
    assert "-int  thrice( int x ){return 3*x;}" in captured.out
    assert "python/tests/test_k.py: black 26.1.0 would change" in captured.out
    assert "python/tests/test_k.py: isort 7.0.0 would change" in captured.out
    assert "-x = [1,2]" not in captured.out  # upstream's slip is not blamed on the patches
    assert "2 file(s) fail MLX's formatting: mlx/k.cpp (clang-format 21.1.8)" in captured.err
    pr = (mlx_like.project.root / "dist" / "upstream-pr" / "PR.md").read_text()
    assert "**2 file(s) need formatting**" in pr and "| parity | cpu | 7 | 0 | 0 | 1 |" in pr


def test_formatters_that_cannot_be_installed_are_reported_loudly(mlx_like: Toy, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    monkeypatch.setenv("MLX_OVERLAY_TOOLS", str(tmp_path / "no-tools"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "1")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setattr(upstream_pr_mod, "has_ensurepip", lambda: False)  # the fallback path, and fast
    rc = main(["-C", str(mlx_like.project.root), "upstream-pr", "--onto", "main"])
    err = capsys.readouterr().err
    assert rc == 12
    assert "FORMATTING NOT CHECKED: cannot install clang-format==21.1.8, black==26.1.0, isort==7.0.0" in err
    assert not (mlx_like.project.root / "dist" / "upstream-pr" / "PR.md").exists()


def test_pr_says_what_changes_per_gpu_generation() -> None:
    # The queue's own upstream patches and docs/upstream-behaviour.md: the fp
    # kernel patch brings the fp block (generations 13/14 gain exactness, 15+
    # unchanged upstream), the affine one the affine block; a patch touching
    # neither adds nothing.
    from overlay_tool.patchfile import PatchFile
    from overlay_tool.upstream_pr import behaviour_section

    root = Path(__file__).resolve().parent.parent
    project = Project.discover(root)

    def paths(glob: str) -> set[str]:
        return {f.path for p in (root / "patches").glob(glob) for f in PatchFile.read(p).files}

    fp = paths("*-Add-an-order-preserving-streamed-fp-qmv-kernel.patch")
    affine = paths("*-Add-an-order-preserving-streamed-qmv-kernel.patch")
    test = paths("*-Test-that-small-batch-fp-qmv-rows-match-the-single-v.patch")
    text = "\n".join(behaviour_section(project, affine | fp | test))
    assert text.startswith("## What changes for models")
    assert "fp models (mxfp4, nvfp4, mxfp8" in text and "Affine models" in text and "<!--" not in text
    assert "| < 15 (13, 14, ...) | `fp_qmv_wide` on every generation" in text
    assert "| >= 15 | `fp_qmv_wide` | unchanged (the mlx-overlay project keeps these exact" in text
    assert "nvfp4 `qqmm` with global scales | `fp_qmv` once per vector" in text
    assert "Affine models" not in "\n".join(behaviour_section(project, fp))
    assert behaviour_section(project, test) == []
    # The CUDA kernel patch: the same bits on the qmv path, M * B >= 8 unchanged upstream.
    text = "\n".join(behaviour_section(project, paths("*-Stream-several-vectors-per-warp-in-CUDA-qmv.patch")))
    assert "CUDA, `quantized_matmul` products that take `qmv`" in text and "Affine models" not in text
    assert "| M * B >= 8 | `qmm_sm80` / `qmm_sm90` / `qmm_naive`: rows differ from M = 1 | unchanged" in text
    # Its figures are the summary's in docs/benchmarks.md.
    bench = upstream_pr_mod.pr_benchmarks(project, paths("*CUDA*"))
    for figure in ("35.4 / 18.0", "130.0 / 30.6", "104.1 / 30.2", "12.0 / 6.4"):
        assert figure in bench
    for figure in ("35.4 -> 18.0", "130.0 -> 30.6", "104.1 -> 30.2", "12.0 -> 6.4"):
        assert figure in text


def test_benchmarks_headings_are_demoted_but_not_code_in_fences() -> None:
    from overlay_tool.upstream_pr import _demote

    md = ("# Bench\n\n## Setup\n```bash\n# build first\npython3 x.py\n```\n### Figures\n"
          "~~~~\n# in a tilde fence\n```\n# still code: a shorter fence of another kind\n~~~~\n#### Left\n")
    assert _demote(md) == ("### Bench\n\n#### Setup\n```bash\n# build first\npython3 x.py\n```\n##### Figures\n"
                           "~~~~\n# in a tilde fence\n```\n# still code: a shorter fence of another kind\n~~~~\n"
                           "###### Left\n")
    # The project's own benchmarks: every fenced line unchanged, every heading demoted.
    bench = (Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md").read_text()
    demoted = _demote(bench)
    assert demoted.count("\n```") == bench.count("\n```") > 0
    assert "\n# once: upstream at the pin" in bench and "\n# once: upstream at the pin" in demoted
    assert "\n#### CUDA: streamed qmv on an H200 (issue 7)" in demoted


MARKED = """# Benchmarks

## How this project measures (its own history: not for the PR)

Session 3 ran the harness.

## Main vs PR

<!-- upstream-pr -->
### CUDA

| M | main | PR |
|---|---|---|
| 4 | 130.3 | 30.8 |

```bash
# the command (a comment, not a heading)
python3 bench/x.py
```

#### Exactness

Every row.
<!-- /upstream-pr -->

## More history

<!-- upstream-pr -->
### Metal

Counted bytes.
<!-- /upstream-pr -->
"""


def _project_with_benchmarks(tmp_path: Path, text: str) -> Project:
    write_files(tmp_path / "p", {"pin.toml": '[upstream]\nurl = "u"\ncommit = "' + "a" * 40 + '"\n',
                                 "patches/series": "", "docs/benchmarks.md": text})
    return Project.discover(tmp_path / "p")


def test_pr_quotes_only_the_marked_regions_of_benchmarks(tmp_path: Path) -> None:
    body = upstream_pr_mod.pr_benchmarks(_project_with_benchmarks(tmp_path, MARKED), {"mlx/k.cpp"})
    assert "Session 3" not in body and "More history" not in body and "<!--" not in body
    # Under PR.md's "## Benchmarks" the regions' top headings are level 3.
    assert body.startswith("### CUDA\n\n| M | main | PR |")
    assert "\n#### Exactness\n" in body and "\n### Metal\n\nCounted bytes." in body
    assert "\n# the command (a comment, not a heading)\n" in body
    lines = MARKED.count("\n")
    assert body.endswith(f"`docs/benchmarks.md` of the mlx-overlay project ({lines} lines, not quoted here).")
    # Unmarked: the whole file, every heading two levels down.
    whole = upstream_pr_mod.pr_benchmarks(_project_with_benchmarks(tmp_path / "w", "# B\n\n## S\n\nx\n"), set())
    assert whole == "### B\n\n#### S\n\nx"


@pytest.mark.parametrize(("text", "message"), [
    ("a\n<!-- upstream-pr -->\nb\n", r"docs/benchmarks.md:2: <!-- upstream-pr --> is never closed by "
                                     r"<!-- /upstream-pr -->"),
    ("a\n<!-- /upstream-pr -->\n", r"docs/benchmarks.md:2: <!-- /upstream-pr --> without an opening"),
    ("<!-- upstream-pr -->\nb\n<!-- upstream-pr -->\n<!-- /upstream-pr -->\n",
     r"docs/benchmarks.md:3: <!-- upstream-pr --> inside the region opened at line 1"),
])
def test_unbalanced_benchmark_markers_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        upstream_pr_mod.pr_benchmarks(_project_with_benchmarks(tmp_path, text), set())


def test_unbalanced_markers_stop_upstream_pr_before_it_writes(mlx_like: Toy) -> None:
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    out = mlx_like.project.root / "dist" / "upstream-pr"
    write_files(out, {"PR.md": "the last draft\n"})
    (mlx_like.project.root / "docs" / "benchmarks.md").write_text("<!-- upstream-pr -->\nfigures\n")
    assert main(["--project", str(mlx_like.project.root), "upstream-pr", "--onto", "main"]) == 2
    assert (out / "PR.md").read_text() == "the last draft\n"
    assert not (mlx_like.project.root / "work" / "upstream-pr").exists()


def test_the_project_s_own_pr_quotes_a_short_summary() -> None:
    """This project's benchmarks.md is thousands of lines of its own runs; the
    PR quotes its marked summary: measured CUDA figures and counted Metal ones."""
    from overlay_tool.patchfile import PatchFile

    root = Path(__file__).resolve().parent.parent
    project = Project.discover(root)

    def paths(glob: str) -> set[str]:
        return {f.path for p in sorted((root / "patches").glob(glob)) for f in PatchFile.read(p).files}

    cuda = paths("*CUDA*")
    assert cuda and all(p.startswith(("mlx/backend/cuda/", "python/tests/")) for p in cuda)
    body = upstream_pr_mod.pr_benchmarks(project, paths("000[2-9]-*") | paths("0010-*"))
    assert len(body.splitlines()) < 80
    assert body.startswith("### CUDA: `qmv` products of 1 to 7 vectors on an NVIDIA H200")
    assert "| 4096 x 14336 | bf16 | 4 | 35.4 / 18.0 (1.97x) |" in body
    assert "\n### Metal: weights read per product of M vectors\n" in body
    assert "session" not in body.lower() and "issue" not in body.lower()
    # A CUDA-only PR quotes the CUDA figures only, a Metal-only one the Metal ones.
    assert "### Metal" not in upstream_pr_mod.pr_benchmarks(project, cuda)
    metal = upstream_pr_mod.pr_benchmarks(project, paths("000[2-7]-*"))
    assert metal.startswith("### Metal") and "### CUDA" not in metal


def test_only_makes_a_pr_of_some_upstream_patches(mlx_like: Toy) -> None:
    """MLX reviews each backend on its own: --only picks the PR's patches by
    number, name or glob, in queue order."""
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    assert main(["--project", str(mlx_like.project.root), "upstream-pr", "--onto", "main", "--only", "0003"]) == 0
    out = mlx_like.project.root / "dist" / "upstream-pr"
    assert sorted(p.name for p in out.iterdir()) == ["0001-Test-thrice.patch", "PR.md"]
    pr = (out / "PR.md").read_text()
    assert pr.startswith("# Test thrice\n") and "A kernel helper." not in pr
    work = mlx_like.project.root / "work" / "upstream-pr"
    assert sh_git(work, "log", "-1", "--format=%s").splitlines() == ["Test thrice"]
    assert sh_git(work, "rev-parse", "HEAD~1") == sh_git(mlx_like.upstream, "rev-parse", "HEAD")
    series = mlx_like.project.series
    where = "patches/series"
    assert upstream_pr_mod.select(series, ["*thrice*"], where) == ["0002-Add-thrice.patch", "0003-Test-thrice.patch"]
    assert upstream_pr_mod.select(series, ["0003-Test-thrice.patch", "0002"], where) == [
        "0002-Add-thrice.patch", "0003-Test-thrice.patch"]
    with pytest.raises(ConfigError, match=r"patches/series: no patch matches --only '0009'"):
        upstream_pr_mod.select(series, ["0009"], where)
    with pytest.raises(ConfigError, match=r"--only '0001' names 0001-Mark-the-overlay-build.patch, an overlay patch"):
        upstream_pr_mod.select(series, ["0001"], where)


def test_only_refuses_a_patch_that_needs_one_left_out(mlx_like: Toy) -> None:
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    mlx_like.add_patch("mlx/k.cpp", CPP + "\nint thrice(int x) { return 3 * x; }\n",
                       CPP + "\nint thrice(int x) { return x + x + x; }\n", "Sum thrice\n\nNo multiply.")
    export_queue(mlx_like.project, log=quiet)
    set_kinds(mlx_like.project, {"0004-Sum-thrice.patch": "upstream"})
    with pytest.raises(QueueDoesNotApply, match=r"refusing: 0004-Sum-thrice.patch \(upstream\) depends on "
                                                r"0002-Add-thrice.patch \(upstream, not in this PR\)"):
        upstream_pr(mlx_like.project, "main", only=["0004"], log=quiet)
    assert not (mlx_like.project.root / "dist" / "upstream-pr").exists()


def test_behaviour_regions_follow_the_paths_the_pr_changes(mlx_like: Toy) -> None:
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    doc = mlx_like.project.root / "docs" / "upstream-behaviour.md"
    doc.write_text("# Behaviour\n\n<!-- upstream-pr: mlx/k.cpp -->\nthrice: 3 x, exactly.\n<!-- /upstream-pr -->\n\n"
                   "<!-- upstream-pr: mlx/backend/cuda/ -->\nCUDA rows.\n<!-- /upstream-pr -->\n")
    assert main(["--project", str(mlx_like.project.root), "upstream-pr", "--onto", "main"]) == 0
    pr = (mlx_like.project.root / "dist" / "upstream-pr" / "PR.md").read_text()
    assert "## What changes for models\n\nthrice: 3 x, exactly.\n\n## Tests" in pr and "CUDA rows" not in pr
    # Only the test patch: no region for its paths, no section.
    assert main(["--project", str(mlx_like.project.root), "upstream-pr", "--onto", "main", "--only", "0003"]) == 0
    assert "What changes for models" not in (mlx_like.project.root / "dist" / "upstream-pr" / "PR.md").read_text()
    doc.write_text("<!-- upstream-pr: mlx/k.cpp -->\nopen\n")
    assert main(["--project", str(mlx_like.project.root), "upstream-pr", "--onto", "main"]) == 2


def test_why_upstream_quotes_the_decision_s_marked_summary() -> None:
    """Not its status line (project-internal: issue and session numbers)."""
    root = Path(__file__).resolve().parent.parent
    why = "\n".join(upstream_pr_mod.why_section(Project.discover(root), {"mlx/backend/cuda/quantized/qmm/qmv.cu"}))
    assert why.startswith("Decision record: `docs/decisions/0001-upstream-or-overlay.md`")
    assert "\n> Summary: the order-preserving streamed quantized mat-vec kernel" in why
    assert "Status:" not in why and "seed 000" not in why and "<!--" not in why


def test_where_the_tests_ran_follows_the_paths_the_pr_changes(mlx_like: Toy) -> None:
    """docs/upstream-tests.md: what ran on a GPU, quoted under "## Tests"
    between the list of test files and the CPU parity summary, for the
    paths the PR changes only; a file with an unclosed region stops the
    command."""
    queue(mlx_like, "\nint thrice(int x) { return 3 * x; }\n", "\n\ndef thrice(x):\n    return 3 * x\n")
    doc = mlx_like.project.root / "docs" / "upstream-tests.md"
    doc.write_text("# Where\n\n<!-- upstream-pr: mlx/k.cpp -->\nRan on a GPU: passed.\n<!-- /upstream-pr -->\n\n"
                   "<!-- upstream-pr: mlx/backend/metal/ -->\nNo Apple GPU.\n<!-- /upstream-pr -->\n")
    root = str(mlx_like.project.root)
    assert main(["--project", root, "upstream-pr", "--onto", "main"]) == 0
    pr = (mlx_like.project.root / "dist" / "upstream-pr" / "PR.md").read_text()
    assert ("## Tests\n\n- `python/tests/test_k.py` (new or changed)\n\nRan on a GPU: passed.\n\nParity tests: "
            in pr) and "No Apple GPU" not in pr
    assert main(["--project", root, "upstream-pr", "--onto", "main", "--only", "0003"]) == 0
    pr = (mlx_like.project.root / "dist" / "upstream-pr" / "PR.md").read_text()
    assert "## Tests\n\n- `python/tests/test_k.py` (new or changed)\n\nParity tests: " in pr and "Ran on" not in pr
    doc.write_text("<!-- upstream-pr: mlx/k.cpp -->\nopen\n")
    assert main(["--project", root, "upstream-pr", "--onto", "main"]) == 2


def test_the_project_s_own_prs_say_where_their_tests_ran() -> None:
    """The CUDA PR names the H200 runs, the Metal PR says no Apple GPU ran
    its tests and what checked the kernels instead."""
    from overlay_tool.patchfile import PatchFile

    root = Path(__file__).resolve().parent.parent
    project = Project.discover(root)

    def paths(glob: str) -> set[str]:
        return {f.path for p in sorted((root / "patches").glob(glob)) for f in PatchFile.read(p).files}

    cuda = "\n".join(upstream_pr_mod.tests_run_lines(project, paths("0009-*") | paths("0010-*")))
    assert cuda.startswith("On an NVIDIA H200") and "`test_cuda_qmv_rows_match_single_vector` passed" in cuda
    assert "No Apple GPU" not in cuda and "<!--" not in cuda
    metal = "\n".join(upstream_pr_mod.tests_run_lines(project, paths("000[2-7]-*")))
    assert metal.startswith("No Apple GPU has run these tests.") and "H200" not in metal
