"""Metal SIMT emulator: MLX's Metal quantized mat-vec kernels, taken verbatim
from a (stock or patched) quantized.h, compiled as host C++ against a shim and
run lane by lane on the CPU. See README.md in this folder and docs/emulator.md.
"""

from overlay_tool.emulator import build
from overlay_tool.emulator.core import (
    DEFAULT_FUNCTIONS,
    KINDS,
    Emulator,
    LaunchSpec,
)
from overlay_tool.emulator.quant import (
    decode,
    dequantize,
    m1_uses_fast,
    qmv_fast_k_alignment,
    quantize,
    reference,
    round_to,
    to_bits,
    wide_vecs_per_tg,
)
from overlay_tool.errors import EmulatorError


def typecheck(header, instantiations=None, **kw):
    """Address-space type check (C++ for OpenCL); see typecheck.py."""
    from overlay_tool.emulator.typecheck import typecheck as _tc
    from overlay_tool.emulator.extract import header_text

    text, label = header_text(header)
    return _tc(text, instantiations, label=kw.pop("label", label), **kw)


__all__ = [
    "DEFAULT_FUNCTIONS", "KINDS", "Emulator", "EmulatorError", "LaunchSpec",
    "decode", "dequantize", "m1_uses_fast", "qmv_fast_k_alignment", "quantize",
    "reference", "round_to", "to_bits", "typecheck", "wide_vecs_per_tg",
]
