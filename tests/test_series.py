from pathlib import Path

import pytest

from overlay_tool.errors import ConfigError
from overlay_tool.series import Series

TEXT = """# header

# about a
0001-a.patch upstream

0002-b.patch overlay
# trailing
"""


def test_roundtrip_keeps_comments() -> None:
    series = Series.parse(Path("series"), TEXT)
    assert series.names == ["0001-a.patch", "0002-b.patch"]
    assert [e.kind for e in series.entries] == ["upstream", "overlay"]
    assert series.entries[0].comments == ("# about a",)
    assert series.render() == TEXT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0001-a.patch\n", "series:1: expected 'NNNN-name.patch upstream|overlay'"),
        ("0001-a.patch sideways\n", "series:1: expected"),
        ("a.patch upstream\n", "series:1: bad patch name 'a.patch'"),
        ("0001-a.patch upstream\n0001-a.patch overlay\n", "series:2: 0001-a.patch is listed twice"),
    ],
)
def test_bad_series_lines(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        Series.parse(Path("series"), text)


def test_problems_name_every_mismatch(tmp_path: Path) -> None:
    (tmp_path / "0001-a.patch").write_text("x")
    (tmp_path / "0003-stray.patch").write_text("x")
    (tmp_path / "series").write_text("0002-b.patch upstream\n0001-a.patch overlay\n")
    problems = Series.load(tmp_path / "series").problems()
    assert any("0002-b.patch is listed but the file does not exist" in p for p in problems)
    assert any("0002-b.patch is number 2 but sits at position 1" in p for p in problems)
    assert any("0003-stray.patch: not listed in series" in p for p in problems)
    assert not any("sits at" in p for p in Series.load(tmp_path / "series").problems(numbering=False))
    with pytest.raises(ConfigError, match="and 3 more"):
        Series.load(tmp_path / "series").validate()
