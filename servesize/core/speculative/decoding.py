"""Speculative decoding: what is proposed, what is accepted, and what the draft is.

A draft (a separate model, an EAGLE-3 head, the model's own MTP layers, or an n-gram lookup
over the context) proposes ``k`` tokens per sequence; the target verifies them in one forward
over ``1 + k`` tokens and keeps the longest accepted run plus one token of its own. With
acceptance ``α_i`` of the ``i``-th proposed token given the ones before it accepted, a
verification step yields

``E = 1 + Σ_{i=1..k} Π_{j≤i} α_j`` tokens, ``= (1 − α^{k+1}) / (1 − α)`` for one ``α``

(Leviathan et al., "Fast Inference from Transformers via Speculative Decoding", ICML 2023,
eq. 1; vLLM reports the per-position form as ``spec_decode_num_accepted_tokens_per_pos``,
``vllm/v1/spec_decode/metrics.py: SpecDecodingLogging``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from servesize.core.architecture import Architecture
from servesize.core.errors import FieldIssue

__all__ = [
    "MAX_SPECULATIVE_TOKENS",
    "SPECULATIVE_METHODS",
    "SpeculativeDecoding",
    "expected_tokens_per_step",
    "speculative_issues",
]

SpeculativeMethod = Literal["eagle3", "mtp", "ngram", "draft_model"]
SPECULATIVE_METHODS: tuple[str, ...] = ("eagle3", "mtp", "ngram", "draft_model")
MAX_SPECULATIVE_TOKENS = 16
"""Largest ``k`` accepted (vLLM and SGLang examples use 1–8)."""


def expected_tokens_per_step(acceptance: tuple[float, ...]) -> float:
    """Tokens one verification step yields: ``1 + Σ_i Π_{j≤i} α_j`` over the ``k`` proposed
    positions (``acceptance`` has one conditional rate per position).

    >>> round(expected_tokens_per_step((0.8, 0.8, 0.8)), 6)  # (1 - 0.8**4) / 0.2
    2.952
    >>> expected_tokens_per_step((0.0, 0.0))
    1.0
    """
    total, run = 1.0, 1.0
    for alpha in acceptance:
        run *= alpha
        total += run
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculativeDecoding:
    """A deployment's speculation: ``method``, ``k`` tokens proposed per step, acceptance.

    ``acceptance`` holds ``k`` conditional rates (a scalar ``α`` is ``k`` equal ones).
    ``draft`` is the draft model's architecture (``draft_model`` only); ``draft_params`` the
    head's parameter count when given (EAGLE-3 / MTP; else derived from the target).
    """

    method: SpeculativeMethod
    num_speculative_tokens: int
    acceptance: tuple[float, ...]
    draft_model: str | None = None
    draft: Architecture | None = None
    draft_params: int | None = None

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    @property
    def expected_tokens(self) -> float:
        """``E`` of :func:`expected_tokens_per_step`."""
        return expected_tokens_per_step(self.acceptance)

    @property
    def mean_acceptance(self) -> float:
        """Accepted drafts per proposed one, ``(E − 1) / k`` (vLLM's "draft acceptance
        rate")."""
        return (self.expected_tokens - 1.0) / self.k

    @classmethod
    def of(
        cls,
        method: SpeculativeMethod,
        num_speculative_tokens: int,
        *,
        acceptance_rate: float | None = None,
        acceptance_per_position: tuple[float, ...] | None = None,
        draft_model: str | None = None,
        draft: Architecture | None = None,
        draft_params: int | None = None,
    ) -> SpeculativeDecoding:
        """From a scalar ``acceptance_rate`` (``k`` equal rates) or a per-position list."""
        if acceptance_per_position is not None:
            rates = tuple(float(a) for a in acceptance_per_position)
        else:
            alpha = 0.0 if acceptance_rate is None else float(acceptance_rate)
            rates = (alpha,) * num_speculative_tokens
        return cls(
            method=method,
            num_speculative_tokens=num_speculative_tokens,
            acceptance=rates,
            draft_model=draft_model,
            draft=draft,
            draft_params=draft_params,
        )


def speculative_issues(
    spec: SpeculativeDecoding, target: Architecture, *, field: str = "/deployment/speculative"
) -> list[FieldIssue]:
    """What the engines would refuse: ``k`` out of ``1..16``, an acceptance outside
    ``[0, 1)``, a per-position list not of length ``k``, MTP on a model without MTP layers
    (DeepSeek-V3 ``num_nextn_predict_layers``, Qwen3-Next ``num_mtp_layers``), a draft model
    missing or with another vocabulary (vLLM ``SpeculativeConfig._verify_args``; the draft's
    tokens index the target's logits)."""
    issues: list[FieldIssue] = []
    k = spec.num_speculative_tokens
    if not 1 <= k <= MAX_SPECULATIVE_TOKENS:
        issues.append(
            FieldIssue(
                f"{field}/num_speculative_tokens", f"must be 1..{MAX_SPECULATIVE_TOKENS}, got {k}"
            )
        )
    if len(spec.acceptance) != k:
        issues.append(
            FieldIssue(
                f"{field}/acceptance_per_position",
                f"needs one rate per proposed token ({k}), got {len(spec.acceptance)}",
            )
        )
    for a in spec.acceptance:
        if not (math.isfinite(a) and 0.0 <= a < 1.0):
            issues.append(FieldIssue(f"{field}/acceptance_rate", f"must be in [0, 1), got {a}"))
            break
    if spec.method == "mtp" and not target.mtp_layers:
        issues.append(
            FieldIssue(
                f"{field}/method",
                f"{target.name} has no MTP layers (num_nextn_predict_layers / num_mtp_layers "
                "is 0): use eagle3, ngram or draft_model",
            )
        )
    if spec.method == "draft_model":
        if spec.draft is None:
            issues.append(FieldIssue(f"{field}/draft_model", "draft_model needs a draft model"))
        elif spec.draft.vocab_size != target.vocab_size:
            issues.append(
                FieldIssue(
                    f"{field}/draft_model",
                    f"the draft's vocabulary ({spec.draft.vocab_size:,}) is not the target's "
                    f"({target.vocab_size:,}): its tokens cannot be verified",
                )
            )
    elif spec.draft_model is not None and spec.method != "eagle3":
        issues.append(
            FieldIssue(
                f"{field}/draft_model",
                f"{spec.method} drafts without a checkpoint: leave draft_model out",
            )
        )
    return issues
