"""vLLM's MXFP4 expert backends and the weight memory each one holds after loading.

vLLM chooses the kernel for MXFP4 experts once per model in ``get_mxfp4_backend``
(vllm-project/vllm: vllm/model_executor/layers/quantization/mxfp4.py), and
``Mxfp4MoEMethod.create_weights`` allocates the expert tensors at the sizes that kernel needs:

- **Marlin** (every CUDA GPU before SM 9.0, and Hopper when ``triton_kernels`` is not
  importable or torch is older than 2.8, or with ``VLLM_MXFP4_USE_MARLIN=1``): the MoE Marlin
  kernel needs ``n % 256 == 0`` and ``k % 128 == 0`` for both GEMMs, so the local expert width
  is padded to ``round_up(I_local, 128)`` and the hidden size to ``round_up(H, 256)``; the
  E2M1 weights (``N·K/2`` bytes), their E8M0 scales (one byte per 32) and the bf16 biases are
  all allocated at the padded sizes, and ``prepare_moe_fp4_layer_for_marlin`` repacks them
  without changing their size. :func:`marlin_padding_item` prices the padding as its own line.
- **Triton** (``triton_kernels``' ``matmul_ogs`` on SM 9.0 - 10.x, as the vllm-openai image
  ships it): the width is padded to a multiple of 64 and the swizzled copies keep a fitted
  per-(layer x expert) overhead (``MemoryConstants.mxfp4_load_overhead_bytes_per_expert``).

The FlashInfer backends of Blackwell and of Hopper behind ``VLLM_USE_FLASHINFER_MOE_MXFP4_BF16``
are not modelled separately (they take the Triton line).
"""

from __future__ import annotations

from collections.abc import Callable

from servesize.core.architecture import Architecture, MoeMlp
from servesize.core.dtypes import bytes_for
from servesize.core.errors import FieldIssue
from servesize.core.hardware.spec import HardwareSpec
from servesize.core.memory.formats import FormatKind
from servesize.core.memory.ledger import LineItem
from servesize.core.memory.scheme import WeightScheme
from servesize.core.memory.sharding import local_experts
from servesize.core.memory.units import cdiv, round_up

__all__ = [
    "MXFP4_BACKENDS",
    "marlin_padded_sizes",
    "marlin_padding_item",
    "mxfp4_expert_bytes",
    "resolve_mxfp4_backend",
]

MXFP4_BACKENDS = ("marlin", "triton")
"""Backends whose memory is modelled, as ``Deployment.mxfp4_backend`` names them."""

MXFP4_BLOCK = 32
"""Elements per E8M0 scale (``mxfp4_block`` of ``create_weights``)."""


def _uses_mxfp4(scheme: WeightScheme) -> bool:
    """Experts quantized by vLLM's ``Mxfp4Config`` (``quant_method: mxfp4``)."""
    quantized = scheme.quantized
    return quantized is not None and quantized.kind is FormatKind.MXFP4 and scheme.method == "mxfp4"


def resolve_mxfp4_backend(
    value: str | None,
    engine: str,
    scheme: WeightScheme,
    hardware: HardwareSpec,
    issues: list[FieldIssue],
    default: Callable[[str, object, str], None],
) -> str | None:
    """The backend vLLM loads MXFP4 experts with; None for other engines and formats.

    Unset, a GPU whose datasheet gives a bf16 peak and no fp8 peak (no FP8 tensor cores: before
    Ada, SM < 8.9) takes Marlin, as ``get_mxfp4_backend`` does below SM 9.0; any other GPU
    takes Triton, what the vllm-openai image runs on Hopper. Ada (SM 8.9, fp8 peak listed) and
    pip installs without ``triton_kernels`` run Marlin and must say so.
    """
    field = "/deployment/mxfp4_backend"
    if value is not None and (engine != "vllm" or not _uses_mxfp4(scheme)):
        where = "vLLM" if engine != "vllm" else "MXFP4-quantized experts"
        issues.append(
            FieldIssue(
                field=field,
                problem=f"applies to {where} only ({engine}, {scheme.method}); leave it unset",
            )
        )
        return None
    if engine != "vllm" or not _uses_mxfp4(scheme):
        return None
    if value is not None:
        key = value.strip().lower()
        if key not in MXFP4_BACKENDS:
            issues.append(
                FieldIssue(
                    field=field, problem=f"{value!r} is not one of {', '.join(MXFP4_BACKENDS)}"
                )
            )
            return None
        return key
    peaks = hardware.peak_tflop_per_s
    if peaks.get("bf16") and not peaks.get("fp8"):
        default(
            "mxfp4_backend",
            "marlin",
            "vLLM get_mxfp4_backend: no FP8 tensor cores (before SM 9.0), Marlin",
        )
        return "marlin"
    default(
        "mxfp4_backend",
        "triton",
        "vLLM get_mxfp4_backend on Hopper with triton_kernels (the vllm-openai image); a pip "
        "install without triton_kernels, or an Ada GPU, loads through Marlin",
    )
    return "triton"


def mxfp4_expert_bytes(intermediate: int, hidden: int, bias_element_bytes: int) -> int:
    """Bytes of one expert as ``create_weights`` allocates it at widths ``I`` and ``H``.

    ``w13``: ``2I·H/2`` E2M1 + ``2I·⌈H/32⌉`` scales; ``w2``: ``H·I/2`` + ``H·⌈I/32⌉``; biases
    ``(2I + H)`` elements (none when ``bias_element_bytes`` is 0).

    >>> mxfp4_expert_bytes(2880, 2880, 2)  # gpt-oss: 8,294,400 + 518,400 + 4,147,200 + ...
    13236480
    """
    w13 = 2 * intermediate * hidden // 2 + 2 * intermediate * cdiv(hidden, MXFP4_BLOCK)
    w2 = hidden * intermediate // 2 + hidden * cdiv(intermediate, MXFP4_BLOCK)
    return w13 + w2 + (2 * intermediate + hidden) * bias_element_bytes


def marlin_padded_sizes(intermediate: int, hidden: int) -> tuple[int, int]:
    """``(round_up(I_local, 128), round_up(H, 256))``, the Marlin branch of ``create_weights``.

    >>> marlin_padded_sizes(2880, 2880), marlin_padded_sizes(1440, 2880)
    ((2944, 3072), (1536, 3072))
    """
    return round_up(intermediate, 128), round_up(hidden, 256)


def marlin_padding_item(
    arch: Architecture,
    layers: range,
    *,
    moe_tensor_parallel_size: int,
    expert_parallel_size: int,
    enable_expert_parallel: bool,
    dtype: str,
) -> LineItem | None:
    """Extra bytes the Marlin backend allocates for the local experts of ``layers``."""
    h = arch.hidden_size
    total = 0
    terms: list[str] = []
    for i in layers:
        mlp = arch.layers[i].mlp
        if not isinstance(mlp, MoeMlp):
            continue
        experts = (
            local_experts(mlp.num_experts, expert_parallel_size)
            if enable_expert_parallel
            else mlp.num_experts
        )
        width = mlp.expert_intermediate_size // moe_tensor_parallel_size
        bias = bytes_for(8, dtype) // 8 if mlp.expert_bias else 0
        width_p, h_p = marlin_padded_sizes(width, h)
        extra = mxfp4_expert_bytes(width_p, h_p, bias) - mxfp4_expert_bytes(width, h, bias)
        total += experts * extra
        term = f"{experts} experts × ({width_p}·{h_p} − {width}·{h}: {extra:,} B)"
        if not terms or terms[-1] != term:
            terms.append(term)
    if not total:
        return None
    moe_layers = sum(1 for i in layers if isinstance(arch.layers[i].mlp, MoeMlp))
    detail = terms[0] if len(terms) == 1 else " + ".join(terms)
    return LineItem(
        name="weights: MXFP4 Marlin padding (vLLM)",
        bytes_per_gpu=total,
        formula=(
            f"I_local → round_up(I_local, 128), H → round_up(H, 256) for w13/w2, scales and "
            f"biases: {moe_layers} layers · {detail} = {total:,} B"
        ),
        category="weights",
    )
