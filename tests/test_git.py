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
