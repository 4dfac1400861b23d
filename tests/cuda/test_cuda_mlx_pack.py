"""bench/cuda_mlx_pack.sh and the build script's --pack / --from-pack: the
module a device build made comes back in pieces under the 16 MiB a file from
$OUT may have, and a later call (a fresh machine) unpacks it instead of
building for about 430 s, only from the kit it was built from. Played here
with a kit of the same layout and a small shared library."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "bench" / "cuda_mlx_pack.sh"
BUILD = ROOT / "bench" / "cuda_mlx_build_device.sh"
MODULE = "core.cpython-312-x86_64-linux-gnu.so"


def make_kit(tmp_path: Path, name: str, manifest: str) -> Path:
    """A kit tar as bench/cuda_mlx_kit.sh lays it out (kit/MANIFEST, the
    tree, deps/), with only what the pack and the header links touch."""
    root = tmp_path / f"{name}-src"
    for d in ("kit/mlx/python/mlx", "kit/mlx/python/tests", "kit/mlx/mlx", "kit/deps/cutlass/include/cutlass",
              "kit/deps/cutlass/include/cute", "kit/deps/cccl/include"):
        (root / d).mkdir(parents=True)
    (root / "kit/MANIFEST").write_text(manifest + "\n")
    (root / "kit/mlx/python/mlx/__init__.py").write_text("")
    kit = tmp_path / f"{name}.tar.xz"
    with tarfile.open(kit, "w:xz") as t:
        t.add(root / "kit", arcname="kit")
    return kit


def build_module(work: Path, kit: Path) -> bytes:
    """Extract the kit into WORK and put a built module beside __init__.py: a
    real shared library with debug sections (for strip to drop) and a section
    named as CUDA's device code, .nv_fatbin, of 3 MB of random bytes (which
    strip keeps, and which make the pack take several pieces). Returns those
    bytes."""
    work.mkdir()
    with tarfile.open(kit) as t:
        t.extractall(work, filter="data")
    src = work / "m.c"
    src.write_text("int mlx_overlay_answer(void) { return 42; }\n" +
                   "".join(f"int helper_{i}(int x) {{ return x + {i}; }}\n" for i in range(200)))
    lib = work / "kit/mlx/python/mlx" / MODULE
    plain = work / "plain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-o", str(plain), str(src)], check=True)
    fatbin = os.urandom(3_000_000)
    (work / "fatbin.bin").write_bytes(fatbin)
    subprocess.run(["objcopy", "--add-section", f".nv_fatbin={work / 'fatbin.bin'}", str(plain), str(lib)], check=True)
    return fatbin


def sections(lib: Path) -> str:
    return subprocess.run(["readelf", "-S", str(lib)], capture_output=True, text=True, check=True).stdout


def sh(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **env})


@pytest.fixture
def packed(tmp_path: Path) -> tuple[Path, Path, bytes]:
    missing = [tool for tool in ("gcc", "strip", "objcopy", "readelf", "nm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} (binutils, gcc) make and read the library the pack strips: not here")
    kit = make_kit(tmp_path, "kit", "mlx 38af8609 (the queue)")
    built = build_module(tmp_path / "built", kit)
    out = tmp_path / "out" / "m"
    r = sh(PACK, "pack", kit, tmp_path / "built", out, PACK_PIECE_BYTES="1000000")
    assert r.returncode == 0, r.stderr
    assert f"packed {MODULE} into " in r.stdout
    return kit, out, built


def test_pack_comes_back_in_pieces_and_unpacks_on_a_fresh_machine(tmp_path: Path,
                                                                    packed: tuple[Path, Path, bytes]) -> None:
    kit, out, built = packed
    pieces = sorted(out.glob("module.tar.xz.*"))
    assert len(pieces) >= 3 and all(p.stat().st_size <= 1_000_000 for p in pieces)
    assert [p.name for p in pieces][:2] == ["module.tar.xz.00", "module.tar.xz.01"]
    # At most 2 folders down and named in letters, digits, '.', '_' and '-': what $OUT gives back.
    assert all(set(p.name) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-") for p in [*pieces, out / "module.sha256"])
    sums = dict(line.split() for line in (out / "module.sha256").read_text().splitlines())
    assert sums["kit"] == hashlib.sha256(kit.read_bytes()).hexdigest()
    assert sums["pack"] == hashlib.sha256(b"".join(p.read_bytes() for p in pieces)).hexdigest()

    # A fresh machine: no WORK yet; the build script unpacks instead of building.
    fresh = tmp_path / "fresh"
    r = sh(BUILD, kit, fresh, tmp_path / "log", "--from-pack", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == "mlx 38af8609 (the queue)"  # the kit's MANIFEST
    assert f"unpacked into {fresh}/kit/mlx/python/mlx: {MODULE}" in r.stdout
    lib = fresh / "kit/mlx/python/mlx" / MODULE
    # Stripped of its debug sections; the device code and what the module exports stay.
    assert ".debug_info" in sections(tmp_path / "built/kit/mlx/python/mlx" / MODULE)
    assert ".debug_info" not in sections(lib) and ".nv_fatbin" in sections(lib)
    subprocess.run(["objcopy", "--dump-section", f".nv_fatbin={tmp_path / 'back.bin'}", str(lib)], check=True)
    assert (tmp_path / "back.bin").read_bytes() == built
    nm = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert "mlx_overlay_answer" in nm
    assert (fresh / "kit/mlx/python/include/cutlass").resolve() == fresh / "kit/deps/cutlass/include/cutlass"
    assert not (fresh / "build").exists()  # nothing configured or built


def test_unpack_refuses_a_pack_of_another_kit_or_a_missing_piece(tmp_path: Path,
                                                                  packed: tuple[Path, Path, bytes]) -> None:
    kit, out, _ = packed
    other = make_kit(tmp_path, "other", "mlx 0123abcd (another tree)")
    fresh = tmp_path / "fresh"
    r = sh(PACK, "unpack", other, fresh, out)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == (f"{out}: built from another kit ({hashlib.sha256(kit.read_bytes()).hexdigest()}), "
                                f"not {other} ({hashlib.sha256(other.read_bytes()).hexdigest()}): build again")
    assert not fresh.exists()
    # Through the build script: the same refusal, and no build starts.
    r = sh(BUILD, other, fresh, tmp_path / "log", "--from-pack", out)
    assert r.returncode == 1 and "built from another kit" in r.stderr and not (fresh / "build").exists()
    assert not (fresh / "kit/mlx/python/mlx" / MODULE).exists()

    left = len(list(out.glob("module.tar.xz.*"))) - 1
    (out / "module.tar.xz.01").unlink()
    r = sh(PACK, "unpack", kit, tmp_path / "fresh2", out)
    assert r.returncode == 1
    assert r.stderr.strip() == f"{out}: the pieces module.tar.xz.* are not the pack module.sha256 names ({left} piece(s))"
    assert not (tmp_path / "fresh2").exists()
    # Control: the same pack, whole, unpacks.
    r = sh(PACK, "pack", kit, tmp_path / "built", out, PACK_PIECE_BYTES="1000000")
    assert r.returncode == 0
    assert sh(PACK, "unpack", kit, tmp_path / "fresh2", out).returncode == 0


def test_pack_without_a_build_says_so(tmp_path: Path) -> None:
    kit = make_kit(tmp_path, "kit", "mlx 38af8609")
    work = tmp_path / "work"
    work.mkdir()
    with tarfile.open(kit) as t:
        t.extractall(work, filter="data")
    r = sh(PACK, "pack", kit, work, tmp_path / "m")
    assert r.returncode == 1 and r.stderr.strip() == f"{work}/kit/mlx/python/mlx: no built library to pack"
    r = sh(PACK, "unpack", kit, work, tmp_path / "nothing")
    assert r.returncode == 1 and r.stderr.strip() == f"{tmp_path}/nothing/module.sha256: no pack here"
    r = sh(PACK, "send", kit, work, tmp_path / "m")
    assert r.returncode == 2 and r.stderr.startswith("usage:")
