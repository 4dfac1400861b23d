from pathlib import Path

import pytest

from overlay_tool.errors import ConfigError
from overlay_tool.patchfile import PatchFile

GOOD = b"""From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.invalid>
Date: Fri, 2 Jan 2026 03:04:05 +0000
Subject: Do a thing

Because.

diff --git a/src/a.txt b/src/a.txt
index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644
--- a/src/a.txt
+++ b/src/a.txt
@@ -1,3 +1,4 @@ ctx
 one
+new
 two
 three
\\ No newline at end of file
"""


def test_parses_description_paths_hunks() -> None:
    patch = PatchFile.parse(Path("p.patch"), GOOD)
    assert (patch.subject, patch.body, patch.author) == ("Do a thing", "Because.", "A U Thor <a@example.invalid>")
    assert [f.path for f in patch.files] == ["src/a.txt"]
    assert patch.files[0].added == [(14, b"new")]
    hunk = patch.hunk_at("src/a.txt", 1)
    assert hunk is not None and hunk.number == 1 and hunk.line == 12


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"hello\n", "p.patch:1: not a patch in git format-patch form"),
        (GOOD.split(b"diff --git")[0], "p.patch: not a patch: no 'diff --git' section"),
        (GOOD.replace(b" two\n three\n", b""), "p.patch:12: corrupt patch: hunk #1 of src/a.txt is truncated"),
        (GOOD.replace(b" two\n", b"?two\n"), "p.patch:15: corrupt patch: hunk #1 of src/a.txt has fewer lines"),
        (GOOD.replace(b"@@ -1,3", b"@@ -1,x"), "p.patch:12: corrupt hunk header"),
        (GOOD.replace(b"Subject: Do a thing\n", b""), "p.patch: malformed mail header"),
        (GOOD + b"garbage\n", "p.patch:18: corrupt patch: unexpected line"),
    ],
)
def test_corrupted_patch_is_one_line_naming_file_and_line(raw: bytes, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        PatchFile.parse(Path("p.patch"), raw)
    assert err.value.message.startswith(expected)


def test_identity_ignores_hunk_rendering_not_content() -> None:
    base = PatchFile.parse(Path("p"), GOOD).identity
    assert PatchFile.parse(Path("p"), GOOD.replace(b"@@ ctx", b"@@ other")).identity == base
    assert PatchFile.parse(Path("p"), GOOD.replace(b"..2222", b"..3333")).identity != base
    assert PatchFile.parse(Path("p"), GOOD.replace(b"Because.", b"Why not.")).identity != base
