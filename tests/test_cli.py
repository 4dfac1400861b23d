import subprocess
import sys

from overlay_tool.cli import main


def test_version_runs_as_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "overlay_tool", "--version"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.startswith("mlx-overlay ")


def test_no_command_prints_help_and_fails() -> None:
    assert main([]) == 2
