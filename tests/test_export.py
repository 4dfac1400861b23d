from pathlib import Path

import pytest

from conftest import Toy, commit_all, sh_git
from overlay_tool.errors import ConfigError, OperationInProgress
from overlay_tool.export import export_queue
from overlay_tool.project import Project

HOSTILE = {
    "diff.noprefix": "true",
    "diff.mnemonicPrefix": "true",
    "color.ui": "always",
    "core.abbrev": "7",
    "diff.renames": "copies",
    "format.signature": "signed by someone",
    "format.numbered": "true",
    "format.subjectPrefix": "PATCHX",
    "diff.algorithm": "patience",
    "diff.context": "9",
    "diff.srcPrefix": "left/",
    "diff.dstPrefix": "right/",
    "diff.suppressBlankEmpty": "true",
    "diff.interHunkContext": "20",
    "diff.indentHeuristic": "false",
    "core.autocrlf": "true",
    "core.quotePath": "false",
    "format.headers": "X-Leak: 1",
    "format.to": "someone@example.invalid",
    "format.from": "true",
    "format.forceInBodyFrom": "true",
    "format.suffix": ".diff",
    "format.signOff": "true",
    "format.useAutoBase": "true",
    "format.noprefix": "true",
    "format.encodeEmailHeaders": "false",
    "i18n.logOutputEncoding": "ISO-8859-1",
}


def patch_bytes(project: Project) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.patches_dir.iterdir())}


def quiet(_: str) -> None:
    pass


def add_rename(toy: Toy) -> None:
    sh_git(toy.work, "mv", "src/b.txt", "src/c.txt")
    toy.add_patch("src/c.txt", "line 30\n", "line thirty\n", "Rename b to c\n\nFor the test of renames.")


def add_unicode(toy: Toy) -> None:
    """Non-ASCII author and path, blank context lines: what encodings and quoting change."""
    (toy.work / "docs").mkdir()
    (toy.work / "docs" / "notes é.txt").write_text("a\n\n\nb\n\n\nc\n")
    commit_all(toy.work, "Add notes\n\nWith an accent.", env={"GIT_AUTHOR_NAME": "Zoë Ünicode"})
    (toy.work / "docs" / "notes é.txt").write_text("a\n\n\nB\n\n\nc\n")
    commit_all(toy.work, "Édit notes\n\nCapital B.")


def test_same_bytes_whatever_the_user_config(toy_queue: Toy, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    add_rename(toy_queue)
    add_unicode(toy_queue)
    export_queue(toy_queue.project, log=quiet)
    baseline = patch_bytes(toy_queue.project)
    assert b"rename from" not in baseline["0003-Rename-b-to-c.patch"]
    user = tmp_path / "hostile.gitconfig"
    user.write_text("".join(f"[{k.split('.')[0]}]\n\t{k.split('.')[1]} = {v}\n" for k, v in HOSTILE.items()))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    for key, value in HOSTILE.items():
        sh_git(toy_queue.work, "config", key, value)  # the checkout's own config too
    for patch in toy_queue.project.patches_dir.glob("*.patch"):
        patch.unlink()  # nothing to reuse: every byte is written afresh
    export_queue(toy_queue.project, log=quiet)
    assert patch_bytes(toy_queue.project) == baseline


def test_unchanged_patches_kept_byte_for_byte(toy_queue: Toy) -> None:
    patches = toy_queue.project.patches_dir
    first = patches / "0001-Change-a.patch"
    # As if written by another git version: a different hunk header, same content.
    tampered = first.read_bytes().replace(b" @@ line 7\n", b" @@ function context\n", 1)
    assert tampered != first.read_bytes()
    first.write_bytes(tampered)
    toy_queue.add_patch("src/b.txt", "line twenty\n", "line 20 again\n", "Change b more\n\nStill b.")
    sh_git(toy_queue.work, "reset", "--soft", "HEAD~2")
    commit_all(toy_queue.work, "Change b\n\nBecause b needs it, now different.")
    lines: list[str] = []
    export_queue(toy_queue.project, log=lines.append)
    assert first.read_bytes() == tampered
    assert b"line 20 again" in (patches / "0002-Change-b.patch").read_bytes()
    assert lines[-1] == "wrote patches/: 2 patch(es), 1 changed, 1 unchanged"


def test_renumbered_patch_keeps_its_bytes_and_kind(toy_queue: Toy) -> None:
    project = toy_queue.project
    second = (project.patches_dir / "0002-Change-b.patch").read_bytes()
    project.series_path.write_text(project.series.render().replace("0002-Change-b.patch overlay",
                                                                   "# b is for upstream\n0002-Change-b.patch upstream"))
    sh_git(toy_queue.work, "rebase", "-q", "--onto", project.pin.commit, "HEAD~1")
    toy_queue.add_patch("README", "toy\n", "toy!\n", "Third\n\nNew one.")
    export_queue(project, log=quiet)
    assert (project.patches_dir / "0001-Change-b.patch").read_bytes() == second
    series = project.series
    assert [(e.name, e.kind) for e in series.entries] == [
        ("0001-Change-b.patch", "upstream"), ("0002-Third.patch", "overlay")]
    assert series.entries[0].comments == ("# b is for upstream",)
    assert project.series_path.read_text().startswith("# the toy queue\n\n")
    assert not (project.patches_dir / "0001-Change-a.patch").exists()


def test_reexport_without_changes_writes_nothing(toy_queue: Toy) -> None:
    before = {p: p.stat().st_mtime_ns for p in toy_queue.project.patches_dir.iterdir()}
    lines: list[str] = []
    export_queue(toy_queue.project, log=lines.append)
    assert lines == ["patches/ is up to date (2 patch(es))"]
    assert {p: p.stat().st_mtime_ns for p in toy_queue.project.patches_dir.iterdir()} == before


def test_empty_range_refused(toy_queue: Toy) -> None:
    before = patch_bytes(toy_queue.project)
    sh_git(toy_queue.work, "reset", "-q", "--hard", toy_queue.project.pin.commit)
    with pytest.raises(ConfigError, match="refusing to export an empty queue"):
        export_queue(toy_queue.project, log=quiet)
    assert patch_bytes(toy_queue.project) == before


@pytest.mark.parametrize("marker", ["rebase-apply/applying", "rebase-merge"])
def test_refused_mid_am_or_rebase(toy_queue: Toy, marker: str) -> None:
    (toy_queue.work / ".git" / marker).parent.mkdir(exist_ok=True)
    (toy_queue.work / ".git" / marker).mkdir()
    with pytest.raises(OperationInProgress, match="refusing to export a half-done queue"):
        export_queue(toy_queue.project, log=quiet)


def test_interrupted_export_leaves_patches_as_they_were(toy_queue: Toy, monkeypatch: pytest.MonkeyPatch) -> None:
    project = toy_queue.project
    before = patch_bytes(project)
    toy_queue.add_patch("README", "toy\n", "toy!\n", "Third\n\nNew one.")
    calls = 0
    real = Path.write_bytes

    def flaky(self: Path, data: bytes) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky)
    with pytest.raises(KeyboardInterrupt):
        export_queue(project, log=quiet)
    assert patch_bytes(project) == before
    assert sorted(p.name for p in project.root.iterdir()) == ["patches", "pin.toml", "work"]


def test_interrupted_between_renames_is_finished_on_next_run(toy_queue: Toy) -> None:
    project = toy_queue.project
    before = patch_bytes(project)
    project.patches_dir.rename(project.root / ".patches.old-4242")
    assert patch_bytes(Project.discover(project.root)) == before
