"""bench/cuda_stock_wheels.py: the stock wheels packed for a device call, the
fatbinary entries of other architectures zeroed in libmlx.so.

Tested on a real ELF shared object (built here by the C compiler) whose
`.nv_fatbin` section holds synthetic containers in the fatbinary layout, so
that the parser, the section lookup and the zeroing run on the same bytes a
loader reads; the real libmlx.so of mlx-cuda-13 0.32.1 went through it in
session 7 (96 sm_90 images kept byte for byte, 576 others zeroed)."""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import cuda_stock_wheels as csw  # bench/ is on sys.path (tests/cuda/conftest.py)

# (kind, arch, payload byte): an ELF image per architecture and one PTX.
ENTRIES = [(2, 80, 0x11), (2, 90, 0x22), (1, 120, 0x33), (2, 120, 0x44)]


def container(entries: list[tuple[int, int, int]], payload_size: int) -> bytes:
    body = b""
    for kind, arch, fill in entries:
        header = bytearray(64)
        struct.pack_into("<HHIQ", header, 0, kind, 0x101, 64, payload_size)
        struct.pack_into("<I", header, 28, arch)
        body += bytes(header) + bytes([fill]) * payload_size
    return struct.pack("<IHHQ", csw.FATBIN_MAGIC, 1, 16, len(body)) + body


def shared_object(tmp_path: Path, section: bytes) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the test's shared object")
    src = tmp_path / "fatbin.c"
    items = ",".join(str(b) for b in section)
    src.write_text(
        '__attribute__((section(".nv_fatbin"), aligned(8), used))\n'
        f"const unsigned char fatbin[{len(section)}] = {{{items}}};\n"
        "int answer(void) { return 42; }\n"
    )
    lib = tmp_path / "libfat.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def test_keeps_the_arch_s_images_and_zeroes_the_others(tmp_path: Path) -> None:
    # Two containers, the first with a body whose end is not 8-aligned.
    section = container(ENTRIES, 13)
    section += bytes(-len(section) % 8) + container(ENTRIES, 24)
    lib = shared_object(tmp_path, section)
    before = lib.read_bytes()
    entries = csw.fatbin_entries(before, *csw.elf_section(before, ".nv_fatbin"))
    assert [(e.kind, e.arch) for e in entries] == [(k, a) for k, a, _ in ENTRIES] * 2
    assert [e.size for e in entries] == [13] * 4 + [24] * 4

    kept, zeroed = csw.keep_arch(lib, 90)
    assert (kept, zeroed) == (2, 3 * 13 + 3 * 24)
    after = lib.read_bytes()
    assert len(after) == len(before)
    for e in entries:
        payload = after[e.payload : e.payload + e.size]
        if (e.kind, e.arch) == (2, 90):
            assert payload == bytes([0x22]) * e.size  # kept byte for byte
        else:
            assert not any(payload)
    # Only payloads changed: every header, and everything outside the section, is as it was.
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert changed and all(any(e.payload <= i < e.payload + e.size for e in entries) for i in changed)


def test_refuses_a_file_without_the_arch(tmp_path: Path) -> None:
    lib = shared_object(tmp_path, container([(2, 80, 1), (1, 120, 2)], 8))
    before = lib.read_bytes()
    with pytest.raises(ValueError, match=r"no sm_90 image to keep \(archs: \[80, 120\]\)"):
        csw.keep_arch(lib, 90)
    assert lib.read_bytes() == before  # nothing written


def test_refuses_what_is_not_a_fatbinary(tmp_path: Path) -> None:
    lib = shared_object(tmp_path, b"\x01" * 32)
    data = lib.read_bytes()
    with pytest.raises(ValueError, match="no fatbinary container at offset"):
        csw.fatbin_entries(data, *csw.elf_section(data, ".nv_fatbin"))
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        csw.elf_section(b"MZ" + bytes(100), ".nv_fatbin")
