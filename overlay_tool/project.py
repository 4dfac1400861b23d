"""Where things are: the project root and the paths derived from it."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from overlay_tool.errors import ConfigError
from overlay_tool.pin import Pin
from overlay_tool.series import Series

PIN_FILE = "pin.toml"
#: The upstream of most projects: its cache keeps the name it has always had.
MLX_URLS = ("https://github.com/ml-explore/mlx.git", "https://github.com/ml-explore/mlx")


def cache_root() -> Path:
    """Shared between projects: ``$MLX_OVERLAY_CACHE``, else ``~/.cache/mlx-overlay``."""
    explicit = os.environ.get("MLX_OVERLAY_CACHE")
    if explicit:
        return Path(explicit).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mlx-overlay"


@dataclass(frozen=True)
class Project:
    root: Path

    @classmethod
    def discover(cls, start: Path | None = None) -> Project:
        """The nearest folder at or above ``start`` (default: the current one) holding pin.toml."""
        here = (start or Path.cwd()).absolute()
        for folder in (here, *here.parents):
            if (folder / PIN_FILE).is_file():
                project = cls(folder)
                project.finish_interrupted_export()
                return project
        raise ConfigError(f"no {PIN_FILE} in {here} or any folder above it (use -C PROJECT)")

    def finish_interrupted_export(self) -> None:
        """Put back patches/ if an export stopped between its two renames."""
        if self.patches_dir.exists():
            return
        for old in sorted(self.root.glob(".patches.old-*")):
            old.rename(self.patches_dir)
            return

    @property
    def pin_path(self) -> Path:
        return self.root / PIN_FILE

    @property
    def pin(self) -> Pin:
        """Read afresh on each access: commands may rewrite pin.toml."""
        return Pin.load(self.pin_path)

    @property
    def patches_dir(self) -> Path:
        return self.root / "patches"

    @property
    def series_path(self) -> Path:
        return self.patches_dir / "series"

    @property
    def series(self) -> Series:
        return Series.load(self.series_path)

    @property
    def work_dir(self) -> Path:
        """The work checkout of upstream with the queue applied (git-ignored)."""
        return self.root / "work" / "mlx"

    @property
    def cache_dir(self) -> Path:
        """A bare clone of the pinned upstream, shared by this user's projects
        that pin the same URL. One per URL: the cache's origin follows
        pin.toml and a fetch prunes the branches origin no longer has, so a
        project pinned to a fork would otherwise move the branches that
        another project's drift and status read."""
        return cache_root() / cache_name(self.pin.url)

    def display(self, path: Path) -> str:
        """``path`` relative to the project root when inside it (for messages)."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def cache_name(url: str) -> str:
    """The folder of ``url``'s cache under cache_root()."""
    if url.rstrip("/") in MLX_URLS:
        return "upstream.git"
    return f"upstream-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"
