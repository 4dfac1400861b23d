"""The local version label of a wheel built from the work checkout.

Patch 0001 makes MLX's ``setup.py`` compute the same string: ``overlay.``
plus the first 12 hex digits of ``HEAD``'s tree (identical on every machine
for the same pin and queue), and ``.dirty`` when tracked files have
uncommitted changes.
"""

from __future__ import annotations

from overlay_tool.git import Repo


def overlay_label(repo: Repo) -> str:
    tree = repo.git("rev-parse", "HEAD^{tree}")[:12]
    dirty = repo.git("status", "--porcelain", "--untracked-files=no")
    return f"overlay.{tree}" + (".dirty" if dirty else "")
