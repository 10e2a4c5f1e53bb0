"""Speculative decoding: ``deployment.speculative`` and the ``speculative`` answer block."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from servesize.core.architecture import Architecture
from servesize.core.replica import SpeculativeEstimate
from servesize.core.speculative import SpeculativeDecoding
from servesize.schemas.base import RequestModel, ResponseModel

__all__ = ["SpeculativeIn", "SpeculativeOut", "SpeedupOut", "speculative_decoding"]


class SpeculativeIn(RequestModel):
    """A draft proposes ``num_speculative_tokens`` tokens per step and the model verifies them
    in one forward: an EAGLE-3 head (``eagle3``), the model's own multi-token-prediction
    layers (``mtp``: DeepSeek-V3/R1, Qwen3-Next), a prompt n-gram lookup (``ngram``) or a
    smaller model of the same vocabulary (``draft_model``). Give the measured acceptance as
    one ``acceptance_rate`` or one rate per position (``acceptance_per_position``, each the
    chance the token is accepted given the ones before it were)."""

    method: Literal["eagle3", "mtp", "ngram", "draft_model"] = Field(examples=["eagle3"])
    num_speculative_tokens: int = Field(ge=1, le=16, examples=[3])
    """Tokens proposed per step ``k`` (vLLM ``num_speculative_tokens``, SGLang
    ``--speculative-num-steps``)."""
    acceptance_rate: float | None = Field(default=None, ge=0.0, lt=1.0, examples=[0.8])
    """Chance each proposed token is accepted, ``α``."""
    acceptance_per_position: list[float] | None = Field(
        default=None, min_length=1, max_length=16, examples=[[0.9, 0.8, 0.7]]
    )
    """Conditional acceptance of position 1..k (vLLM's per-position acceptance counts over
    the drafts that reached that position)."""
    draft_model: str | None = Field(
        default=None, max_length=256, examples=["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]
    )
    """``draft_model``: a catalogue or custom model id (its vocabulary must be the target's);
    ``eagle3``: the head's checkpoint, for the launch command."""
    draft_params: int | None = Field(default=None, ge=1, le=10**12, examples=[424_681_472])
    """``eagle3`` only: the head's parameters when not the default (one target layer, the
    3h → h fusion and a 32,000-token output head)."""

    @model_validator(mode="after")
    def _one_acceptance(self) -> SpeculativeIn:
        if (self.acceptance_rate is None) == (self.acceptance_per_position is None):
            raise ValueError("give exactly one of acceptance_rate and acceptance_per_position")
        return self


def speculative_decoding(
    spec: SpeculativeIn | None, draft: Architecture | None = None
) -> SpeculativeDecoding | None:
    """The core description of ``spec`` (``draft``: the resolved ``draft_model``)."""
    if spec is None:
        return None
    per = spec.acceptance_per_position
    return SpeculativeDecoding.of(
        spec.method,
        spec.num_speculative_tokens,
        acceptance_rate=spec.acceptance_rate,
        acceptance_per_position=tuple(per) if per is not None else None,
        draft_model=spec.draft_model,
        draft=draft,
        draft_params=spec.draft_params,
    )


class SpeedupOut(ResponseModel):
    """Pure-decode steps of one batch size with and without speculation."""

    batch_size: int
    decode_step_s: float
    """A plain decode step (the plain TPOT)."""
    verification_step_s: float
    """The model over ``1 + k`` tokens per sequence."""
    draft_s: float
    """The draft's ``k`` forwards (0 for n-gram)."""
    tpot_s: float
    """``(verification_step_s + draft_s) / E``."""
    speedup: float
    """``decode_step_s / tpot_s``: below 1 speculation no longer pays."""


class SpeculativeOut(ResponseModel):
    """What speculation does at this point (``docs/modeling.md`` §3.17)."""

    method: str
    num_speculative_tokens: int
    expected_tokens_per_step: float = Field(examples=[2.952])
    """``E = 1 + Σ_i Π_{j≤i} α_j`` (``(1 − α^{k+1})/(1 − α)`` for one ``α``)."""
    step_cost_s: float
    """Added to a step of the resident batch: verification and draft less a plain decode."""
    baseline_tpot_s: float
    """TPOT of the same point without speculation."""
    baseline_throughput_output_tokens_per_s: float
    speedup: float
    """``baseline_tpot_s / tpot_s`` at this point."""
    draft_weight_bytes_per_gpu: int
    draft_kv_layers: int
    """Layers of the model's KV shape the draft adds to every token's KV."""
    break_even_batch_size: int | None
    """Smallest batch of ``speedup_by_batch`` where speculation costs more than it gains (null:
    it pays at every batch listed)."""
    speedup_by_batch: list[SpeedupOut]

    @classmethod
    def of(cls, spec: SpeculativeDecoding, est: SpeculativeEstimate) -> SpeculativeOut:
        tpot = float(est.estimate.tpot_s[0])
        base = float(est.baseline.tpot_s[0])
        return cls(
            method=spec.method,
            num_speculative_tokens=spec.k,
            expected_tokens_per_step=est.expected_tokens_per_step,
            step_cost_s=est.step_cost_s,
            baseline_tpot_s=base,
            baseline_throughput_output_tokens_per_s=float(
                est.baseline.throughput_output_tokens_per_s[0]
            ),
            speedup=base / tpot if tpot > 0 else 0.0,
            draft_weight_bytes_per_gpu=est.draft_weight_bytes_per_gpu,
            draft_kv_layers=est.draft_kv_layers,
            break_even_batch_size=est.break_even_batch,
            speedup_by_batch=[
                SpeedupOut.model_validate(p, from_attributes=True) for p in est.speedup_by_batch
            ],
        )
