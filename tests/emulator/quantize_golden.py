"""Golden hashes of MLX's own affine quantization, to check
overlay_tool.emulator.quantize bit for bit without MLX installed.

Regenerate (needs the mlx wheel, e.g. `pip install 'mlx[cpu]'` on Linux):
    python tests/emulator/quantize_golden.py > /tmp/golden.txt
and paste the dictionary into GOLDEN below.
"""

from __future__ import annotations

import hashlib

import numpy as np

DTYPES = ("float16", "bfloat16", "float32")
BITS = (2, 3, 4, 5, 6, 8)
GROUPS = (32, 64, 128)
MLX_VERSION = "0.32.4"


def weights(dtype: str, bits: int, gs: int) -> np.ndarray:
    """float32 weights (8, 256): rows of different scales, one all-positive
    and one all-negative group, exact ties of the rounding included."""
    rng = np.random.default_rng([DTYPES.index(dtype), bits, gs])
    w = rng.standard_normal((8, 256)) * np.exp2(rng.integers(-6, 3, (8, 1)))
    w[3, :gs] = np.abs(w[3, :gs])
    w[5, :gs] = -np.abs(w[5, :gs])
    w[6] = np.round(w[6] * 8) / 8  # many values on a coarse grid
    return w.astype(np.float32)


def digest(wq: np.ndarray, scales_f32: np.ndarray, biases_f32: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in (np.ascontiguousarray(wq, np.uint32), np.ascontiguousarray(scales_f32, np.float32),
              np.ascontiguousarray(biases_f32, np.float32)):
        h.update(a.tobytes())
    return h.hexdigest()[:24]


# digest of (wq, scales as float32, biases as float32) from mx.quantize of
# mlx 0.32.4 (CPU, Linux x86-64)
GOLDEN: dict[tuple[str, int, int], str] = {
    ("float16", 2, 32): "09e7f1725eee4b39598b237e",
    ("float16", 2, 64): "7787077e315178098db8f26c",
    ("float16", 2, 128): "bfca6eaadcdbe595c304c731",
    ("float16", 3, 32): "36d47cbf8d736ea67e10355d",
    ("float16", 3, 64): "68736e66a468519db7a35e7b",
    ("float16", 3, 128): "e662ad1734096e56242abfb5",
    ("float16", 4, 32): "ad48b5aaf760d3e599894fc2",
    ("float16", 4, 64): "60ab93b0cccf48d87c77c479",
    ("float16", 4, 128): "499b5fc84cfebd1493aada35",
    ("float16", 5, 32): "19b2d91a9356be98af07068f",
    ("float16", 5, 64): "9b5d46a6f09992f7b9a5f681",
    ("float16", 5, 128): "abc7448a135d8d95841ef680",
    ("float16", 6, 32): "6805aebf750d5c3a00e318cf",
    ("float16", 6, 64): "9c2ec75453b398562f648856",
    ("float16", 6, 128): "a52702a9bce78838a9692ba6",
    ("float16", 8, 32): "d4d1039eef4153826e1a5400",
    ("float16", 8, 64): "e858a4ce4d29fb133823dbc4",
    ("float16", 8, 128): "b9d9cb22947628e6d0e119e8",
    ("bfloat16", 2, 32): "56554a9a68dfd9212fdd55c2",
    ("bfloat16", 2, 64): "fddd0651f1c5787cea940141",
    ("bfloat16", 2, 128): "4144958286d66fb7b73a87ee",
    ("bfloat16", 3, 32): "c0d755abb0aa858ce509d6b3",
    ("bfloat16", 3, 64): "a73eddbbdb944b48633e6bda",
    ("bfloat16", 3, 128): "6a633a408ba4820fba7620e2",
    ("bfloat16", 4, 32): "6e3d68db17464c4d5b4c40f8",
    ("bfloat16", 4, 64): "b667c89af9222f01f7ac77db",
    ("bfloat16", 4, 128): "da3d5b83b95d069f498a6684",
    ("bfloat16", 5, 32): "7fb7e03aa916eed32a178e2e",
    ("bfloat16", 5, 64): "fcd8d22e710bc7e8ff7f2d6f",
    ("bfloat16", 5, 128): "95e75ae8b0d984218e71fdb4",
    ("bfloat16", 6, 32): "357830cb0861dce441b9713b",
    ("bfloat16", 6, 64): "b2cb40135478e895e8e3b3f7",
    ("bfloat16", 6, 128): "95548c999f1651ff150e5526",
    ("bfloat16", 8, 32): "1e6b7c43cbb9966436b60b12",
    ("bfloat16", 8, 64): "059255c63bfc529b8b4aeb65",
    ("bfloat16", 8, 128): "1013d2f537c6d779b3449d87",
    ("float32", 2, 32): "7010a5a2d40862eee2285dc8",
    ("float32", 2, 64): "45eb552aea0c46407a266c15",
    ("float32", 2, 128): "3d0047df0915d88e48313cf5",
    ("float32", 3, 32): "9491859b0e3b04f91c2e025a",
    ("float32", 3, 64): "265444bc9bba9304d49f8e28",
    ("float32", 3, 128): "682abfb3fe0a2af35f8b3b48",
    ("float32", 4, 32): "3711a4d2d011339f0dfc4b9e",
    ("float32", 4, 64): "2a543c50064a9106b58b48a0",
    ("float32", 4, 128): "66445bed654fe5170ea87e01",
    ("float32", 5, 32): "acd94f32529bef4352387640",
    ("float32", 5, 64): "1defc6c4529b05eaecff7d66",
    ("float32", 5, 128): "f492b69688823346930baae3",
    ("float32", 6, 32): "7dcece55583ba357ace55b97",
    ("float32", 6, 64): "0174e154f29e7166592a4ba6",
    ("float32", 6, 128): "6fa8a61d493d01c321d02df8",
    ("float32", 8, 32): "67eabf0d12823f1fa5150b7f",
    ("float32", 8, 64): "19ebf0129adab2af791523c4",
    ("float32", 8, 128): "c8086bea317cbec359158bfc",
}


def _generate() -> None:  # pragma: no cover - needs mlx
    import mlx.core as mx

    from overlay_tool.emulator.quant import decode, round_to

    mdt = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}
    print(f"# mlx {mx.__version__}")
    print("GOLDEN = {")
    for dt in DTYPES:
        for bits in BITS:
            for gs in GROUPS:
                w = decode(round_to(weights(dt, bits, gs), dt), dt).astype(np.float32)
                q, s, b = mx.quantize(mx.array(w).astype(mdt[dt]), group_size=gs, bits=bits)
                d = digest(np.array(q), np.array(s.astype(mx.float32)), np.array(b.astype(mx.float32)))
                print(f'    ("{dt}", {bits}, {gs}): "{d}",')
    print("}")


if __name__ == "__main__":
    _generate()
