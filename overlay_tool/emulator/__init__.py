"""Metal SIMT emulator: MLX's Metal quantized mat-vec kernels, taken verbatim
from a (stock or patched) quantized.h or fp_quantized.h, compiled as host C++
against a shim and run lane by lane on the CPU. See README.md in this folder
and docs/emulator.md.
"""

from overlay_tool.emulator import build
from overlay_tool.emulator.core import (
    DEFAULT_FUNCTIONS,
    KINDS,
    Emulator,
    LaunchSpec,
)
from overlay_tool.emulator.fp import FpEmulator
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

# Import the submodule before defining the function of the same name: the
# package attribute then stays the function (a later `import
# overlay_tool.emulator.typecheck` finds the module in sys.modules and does not
# rebind it).
from overlay_tool.emulator import typecheck as _typecheck_module  # noqa: E402


def typecheck(header, instantiations=None, **kw):
    """Address-space type check (C++ for OpenCL) of a header (path or text);
    see typecheck.py. ``instantiations``: [(function, template_args, takes_M)]."""
    from overlay_tool.emulator.extract import header_text

    text, label = header_text(header)
    return _typecheck_module.typecheck(text, instantiations, label=kw.pop("label", label), **kw)


__all__ = [
    "DEFAULT_FUNCTIONS", "KINDS", "Emulator", "EmulatorError", "FpEmulator", "LaunchSpec",
    "decode", "dequantize", "m1_uses_fast", "qmv_fast_k_alignment", "quantize",
    "reference", "round_to", "to_bits", "typecheck", "wide_vecs_per_tg",
]
