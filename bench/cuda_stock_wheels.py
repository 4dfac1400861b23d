#!/usr/bin/env python3
"""The stock MLX CUDA wheels, packed for a device call: mlx-sm90.tar.xz.

The device scripts (bench/cuda_qmv_device.sh, cuda_probe_device.sh,
cuda_mlx_run_device.sh) time and test the stock `mlx` + `mlx-cuda-13` wheels
beside the patched code. A device call carries at most 64 MiB, and the two
wheels unpack to about 190 MB, most of it `libmlx.so`: host code and a
fatbinary of every kernel for sm_75, 80, 90, 100, 120 and 121 (and PTX for
120). This keeps what an H200 runs: the wheels unpacked as one site folder,
`libmlx.so` with its symbol tables stripped (`strip --strip-unneeded`) and
the payload of every fatbinary entry for another architecture zeroed in
place (same sizes and offsets: the loader still finds the headers and picks
the sm_90 image), packed with xz.

Fatbinary layout (`.nv_fatbin`): containers of a 16-byte header (magic
0xBA55ED50, version, header size, size of the entries), each entry a header
(kind: 1 PTX, 2 ELF; header size; payload size; the SM number at byte 28)
followed by its payload.

Usage: python3 bench/cuda_stock_wheels.py OUT [--version 0.32.1] [--arch 90] [--wheels DIR]
  --wheels: a folder that already holds both wheels (else pip downloads them)
"""
from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50


@dataclass(frozen=True)
class Entry:
    kind: int  # 1: PTX, 2: ELF (cubin)
    arch: int  # SM number, e.g. 90
    payload: int  # offset of the payload in the file
    size: int


def elf_section(data: bytes, name: str) -> tuple[int, int]:
    """(file offset, size) of the section `name` of a 64-bit little-endian ELF."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i: int) -> tuple[int, int, int]:
        name_off, = struct.unpack_from("<I", data, shoff + i * shentsize)
        offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
        return name_off, offset, size
    _, strtab, _ = header(shstrndx)
    for i in range(shnum):
        name_off, offset, size = header(i)
        end = data.index(b"\0", strtab + name_off)
        if data[strtab + name_off : end].decode() == name:
            return offset, size
    raise ValueError(f"no section {name}")


def fatbin_entries(data: bytes, offset: int, size: int) -> list[Entry]:
    """Every entry of the fatbinary containers in data[offset:offset + size]."""
    entries = []
    pos, end = offset, offset + size
    while pos < end:
        magic, _version, header_size, body = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            if not any(data[pos:end]):  # zero padding after the last container
                break
            raise ValueError(f"no fatbinary container at offset {pos:#x}")
        e, body_end = pos + header_size, pos + header_size + body
        while e < body_end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, e)
            arch, = struct.unpack_from("<I", data, e + 28)
            entries.append(Entry(kind, arch, e + entry_header, payload))
            e += entry_header + payload
        pos = body_end + (-body_end % 8)
    return entries


def keep_arch(path: Path, arch: int) -> tuple[int, int]:
    """Zero, in place, the payloads of `path`'s fatbinary entries for other
    architectures than `arch`. Returns (entries kept, bytes zeroed)."""
    data = bytearray(path.read_bytes())
    offset, size = elf_section(bytes(data), ".nv_fatbin")
    entries = fatbin_entries(bytes(data), offset, size)
    kept = [e for e in entries if e.arch == arch and e.kind == 2]
    if not kept:
        raise ValueError(f"{path}: no sm_{arch} image to keep (archs: {sorted({e.arch for e in entries})})")
    zeroed = 0
    for e in entries:
        if e not in kept:
            data[e.payload : e.payload + e.size] = bytes(e.size)
            zeroed += e.size
    path.write_bytes(data)
    return len(kept), zeroed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--version", default="0.32.1")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--wheels", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheels = args.wheels or Path(tmp) / "wheels"
        if not args.wheels:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.12", "--platform", "manylinux_2_35_x86_64", "-d", str(wheels),
                            f"mlx=={args.version}", f"mlx-cuda-13=={args.version}"], check=True)
        site = Path(tmp) / "site"
        for pattern in (f"mlx-{args.version}-*.whl", f"mlx_cuda_13-{args.version}-*.whl"):
            found = sorted(wheels.glob(pattern))
            if not found:
                raise SystemExit(f"cuda_stock_wheels: {wheels}: no wheel {pattern}")
            with zipfile.ZipFile(found[0]) as z:
                z.extractall(site)
        lib = site / "mlx" / "lib" / "libmlx.so"
        subprocess.run(["strip", "--strip-unneeded", str(lib)], check=True)
        kept, zeroed = keep_arch(lib, args.arch)
        args.out.mkdir(parents=True, exist_ok=True)
        tar = args.out / f"mlx-sm{args.arch}.tar.xz"
        with tarfile.open(tar, "w:xz") as t:
            for p in sorted(site.iterdir()):
                t.add(p, arcname=p.name)
        print(f"{tar}: mlx {args.version} + mlx-cuda-13, {kept} sm_{args.arch} images kept, "
              f"{zeroed / 1e6:.1f} MB of other images zeroed, {tar.stat().st_size / 1e6:.1f} MB")
        shutil.rmtree(site)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
