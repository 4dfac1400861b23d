from pathlib import Path

import pytest

from overlay_tool import git
from overlay_tool.errors import GitError, MissingTool
from overlay_tool.git import Repo, git_environment, run_git


def test_only_insteadof_survives_from_user_config(tmp_path: Path, git_env: dict[str, str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user.gitconfig"
    user.write_text(
        '[user]\n\tname = Someone\n[diff]\n\tnoprefix = true\n[commit]\n\tgpgSign = true\n'
        '[url "/srv/mirror with space/mlx"]\n\tinsteadOf = https://github.com/ml-explore/mlx.git\n'
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    env = git_environment()
    isolated = Path(env["GIT_CONFIG_GLOBAL"]).read_text()
    assert "insteadOf" in isolated and "noprefix" not in isolated and "Someone" not in isolated
    out = run_git(["config", "--global", "--get-regexp", "."], cwd=tmp_path).stdout.decode()
    assert out == "url./srv/mirror with space/mlx.insteadof https://github.com/ml-explore/mlx.git\n"
    assert run_git(["config", "diff.noprefix"], cwd=tmp_path).stdout.decode().strip() == "false"
    assert run_git(["ls-remote", "--get-url", "https://github.com/ml-explore/mlx.git"],
                   cwd=tmp_path).stdout.decode().strip() == "/srv/mirror with space/mlx"


def test_inherited_git_variables_are_dropped(git_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env = git_environment()
    assert "GIT_DIR" not in env and env["GIT_SSH_COMMAND"] == "ssh -o BatchMode=yes"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_COMMITTER_NAME"] == git.COMMITTER_NAME


def test_failure_raises_with_stderr(tmp_path: Path, git_env: dict[str, str]) -> None:
    with pytest.raises(GitError, match="not a git repository"):
        Repo(tmp_path).git("rev-parse", "HEAD")


def test_verbose_echoes_commands(tmp_path: Path, git_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    git.set_verbose(True)
    try:
        run_git(["--version"])
    finally:
        git.set_verbose(False)
    assert "+ git --version" in capsys.readouterr().err


def test_missing_git_is_named(tmp_path: Path, git_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingTool, match="git is not installed"):
        run_git(["--version"])


def test_version_and_date_names_the_nearest_tag_or_the_hash(tmp_path: Path, git_env: dict[str, str]) -> None:
    from conftest import commit_all, sh_git

    sh_git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("1\n")
    first = commit_all(tmp_path, "first", env={"GIT_COMMITTER_DATE": "2026-08-17T10:00:00Z"})
    repo = Repo(tmp_path)
    assert repo.version_and_date(first) == f"{first[:8]}, 2026-08-17"  # no tag reaches it
    sh_git(tmp_path, "tag", "v0.32.1")
    (tmp_path / "f").write_text("2\n")
    second = commit_all(tmp_path, "second", env={"GIT_COMMITTER_DATE": "2026-08-22T23:30:00+09:00"})
    assert repo.version_and_date(first) == "v0.32.1-0, 2026-08-17"
    assert repo.version_and_date(second) == "v0.32.1-1, 2026-08-22"  # the committer's own date
