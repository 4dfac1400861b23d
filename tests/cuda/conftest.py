"""The CUDA harness tests import bench/cuda_qmv.py; `pinned_checkout` is the
core fixture of tests/conftest.py."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
