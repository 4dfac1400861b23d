from pathlib import Path

import pytest

from overlay_tool.errors import ConfigError
from overlay_tool.pin import Pin

SHA = "9a795735ad9a42664e08f42361b405ed570bcf1a"
GOOD = f"""# comment kept
[upstream]
url = "https://github.com/ml-explore/mlx.git"
commit = "{SHA}"  # trailing comment kept
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pin.toml"
    path.write_text(text)
    return path


def test_loads_typed_pin_with_default_branch(tmp_path: Path) -> None:
    pin = Pin.load(write(tmp_path, GOOD))
    assert (pin.url, pin.commit, pin.branch, pin.short) == (
        "https://github.com/ml-explore/mlx.git", SHA, "main", SHA[:8])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD + "colour = 'red'\n", "unknown key 'upstream.colour'"),
        (GOOD + "[build]\nx = 1\n", "unknown key 'build'"),
        (GOOD.replace(SHA, SHA[:8]), "upstream.commit must be a full 40-hex-digit"),
        (GOOD.replace(SHA, SHA.upper()), "upstream.commit must be a full 40-hex-digit"),
        (GOOD.replace(SHA, "g" * 40), "upstream.commit must be a full 40-hex-digit"),
        (GOOD.replace('url = "https://github.com/ml-explore/mlx.git"\n', ""), "missing key 'upstream.url'"),
        (GOOD.replace(f'"{SHA}"', "12"), "upstream.commit must be a str"),
        (GOOD + "[[", "invalid TOML"),
    ],
)
def test_bad_pin_is_one_line_naming_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        Pin.load(path)
    assert expected in err.value.message
    assert str(path) in err.value.message
    assert "\n" not in err.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pin.toml: not found"):
        Pin.load(tmp_path / "pin.toml")


def test_with_commit_keeps_comments_and_layout(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    new = "846d176227a0ac13d2667e58d2bb68b322109ab0"
    pin = Pin.load(path).with_commit(new)
    assert pin.commit == new
    assert path.read_text() == GOOD.replace(SHA, new)
    with pytest.raises(ConfigError):
        pin.with_commit("846d176")


NOTED = f"""[upstream]
# v0.32.0-231, 2026-08-17
commit = "{SHA}"
# v9, 2020-01-01
url = "https://github.com/ml-explore/mlx.git"
"""


def test_with_commit_renews_the_version_note_above_the_commit(tmp_path: Path) -> None:
    """The note in the form the tool writes, right above ``commit``, described
    the old commit: it is replaced. The same form above another key is left."""
    path = write(tmp_path, NOTED)
    new = "846d176227a0ac13d2667e58d2bb68b322109ab0"
    Pin.load(path).with_commit(new, note="v0.32.1-26, 2026-08-22")
    assert path.read_text() == NOTED.replace(SHA, new).replace("v0.32.0-231, 2026-08-17", "v0.32.1-26, 2026-08-22")


@pytest.mark.parametrize("above", ["# pinned for the CUDA fix", "# v0.32.0-231 (2026-08-17)", ""])
def test_with_commit_keeps_any_other_comment_above_the_commit(tmp_path: Path, above: str) -> None:
    text = NOTED.replace("# v0.32.0-231, 2026-08-17", above)
    path = write(tmp_path, text)
    new = "846d176227a0ac13d2667e58d2bb68b322109ab0"
    Pin.load(path).with_commit(new, note="v0.32.1-26, 2026-08-22")
    assert path.read_text() == text.replace(SHA, new)
