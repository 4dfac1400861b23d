"""One exception type per failure, each with its own exit code.

Modelled on cibuildwheel's ``errors.py``: code raises a specific error with a
one-line message naming the file, patch or key at fault; ``cli.main`` turns it
into ``mlx-overlay: error: <message>`` on stderr and the exit code below.
Exit codes are part of the interface (CI scripts branch on them), so they never
change meaning once released.
"""

from __future__ import annotations


class OverlayError(Exception):
    """Base class; ``exit_code`` is what the process exits with."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(OverlayError):
    """pin.toml, patches/series or a patch file is malformed or missing."""

    exit_code = 2


class GitError(OverlayError):
    """A git command failed unexpectedly (its stderr is in the message)."""

    exit_code = 3


class UpstreamUnreachable(OverlayError):
    """The upstream repository (or its mirror) cannot be fetched."""

    exit_code = 4


class QueueDoesNotApply(OverlayError):
    """A patch of the queue fails to apply to its base."""

    exit_code = 5


class QueueStale(OverlayError):
    """Re-exporting the queue would change patches/ (check gate)."""

    exit_code = 6


class DirtyCheckout(OverlayError):
    """The work checkout has uncommitted changes the operation would touch."""

    exit_code = 7


class OperationInProgress(OverlayError):
    """An am/rebase/overlay operation is under way; finish or abort it first."""

    exit_code = 8


class BuildError(OverlayError):
    """Building the patched wheel failed (log path in the message)."""

    exit_code = 9


class TestFailure(OverlayError):
    """A parity or upstream test suite failed."""

    __test__ = False  # not a pytest test class
    exit_code = 10


class EmulatorError(OverlayError):
    """The Metal emulator could not extract, compile or run a kernel."""

    exit_code = 11


class MissingTool(OverlayError):
    """A required program or system package is absent (named in the message)."""

    exit_code = 12


class FormatError(OverlayError):
    """Patches meant for upstream fail MLX's formatting (clang-format, black)."""

    exit_code = 13
