"""mlx-overlay: a patch queue against a pinned ml-explore/mlx commit, and its tool."""

__version__ = "0.1.0"
