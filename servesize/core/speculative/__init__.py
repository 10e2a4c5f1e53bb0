"""Speculative decoding: tokens per verification step, the draft's cost and memory, and where
it stops paying (docs/modeling.md §3.17)."""

from servesize.core.speculative.cost import (
    EAGLE3_DRAFT_VOCAB,
    KERNELS_PER_DRAFT_LAYER,
    DraftPlan,
    DraftShape,
    SpeedupPoint,
    bytes_per_param,
    draft_plan,
    draft_shape,
    draft_step_s,
    speedup_by_batch,
    verification_step_s,
    verification_work,
)
from servesize.core.speculative.decoding import (
    MAX_SPECULATIVE_TOKENS,
    SPECULATIVE_METHODS,
    SpeculativeDecoding,
    expected_tokens_per_step,
    speculative_issues,
)
from servesize.core.speculative.launch import (
    DRAFT_PLACEHOLDER,
    sglang_speculative_args,
    trtllm_speculative_config,
    vllm_speculative_args,
)
from servesize.core.speculative.memory import with_draft

__all__ = [
    "DRAFT_PLACEHOLDER",
    "EAGLE3_DRAFT_VOCAB",
    "KERNELS_PER_DRAFT_LAYER",
    "MAX_SPECULATIVE_TOKENS",
    "SPECULATIVE_METHODS",
    "DraftPlan",
    "DraftShape",
    "SpeculativeDecoding",
    "SpeedupPoint",
    "bytes_per_param",
    "draft_plan",
    "draft_shape",
    "draft_step_s",
    "expected_tokens_per_step",
    "sglang_speculative_args",
    "speculative_issues",
    "speedup_by_batch",
    "trtllm_speculative_config",
    "verification_step_s",
    "verification_work",
    "vllm_speculative_args",
    "with_draft",
]
