"""What a verification step costs: the target over ``1 + k`` tokens per sequence plus the draft.

**Target.** vLLM V1 schedules ``1 + k`` tokens for every decoding request
(``vllm/v1/core/sched/scheduler.py: Scheduler.schedule``, ``num_scheduled_tokens`` =
``1 + len(spec_token_ids)``) and verifies them in one forward, replayed from CUDA graphs of
uniform query length (``uniform_decode_query_len = 1 + num_speculative_tokens``,
``vllm/v1/worker/gpu_model_runner.py``). Costed as ``B(1 + k)`` rows through every GEMM and the
output head, with each sequence's KV read once for its ``1 + k`` queries:
``StepWork.decode(B(1 + k))`` with ``Σ c_j + B·k`` context tokens.

**Draft.** ``k`` sequential forwards of the draft over ``B`` rows
(``vllm/v1/spec_decode/eagle.py: EagleProposer.propose``, top-1 chain), each a roofline of its
own: ``max(2·P_read·B / (peak·η_c), (W_read + B·c̄·kv_draft) / (BW·η_m)) + n_kernels·t_floor``,
per GPU (the head is sharded like the target). EAGLE-3: one decoder layer of the target with a
``2h`` input, the ``3h → h`` fusion of three hidden states and an output head over its own
32,000-token vocabulary (Li et al., "EAGLE-3", arXiv:2503.01840, §3; ``draft_vocab_size`` of
``yuhuili/EAGLE3-LLaMA3.1-Instruct-8B``). MTP: the model's own ``num_nextn_predict_layers``
modules (DeepSeek-V3 technical report §2.2), reading the expected experts a batch touches. A
draft model: its own parameters and KV. n-gram: no GPU work (a CPU lookup over the prompt,
``vllm/v1/spec_decode/ngram_proposer.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servesize.core.architecture import Architecture, summarize
from servesize.core.speculative.decoding import SpeculativeDecoding
from servesize.core.steptime import StepTimeModel, StepWork, expected_experts_touched

__all__ = [
    "EAGLE3_DRAFT_VOCAB",
    "KERNELS_PER_DRAFT_LAYER",
    "DraftPlan",
    "DraftShape",
    "SpeedupPoint",
    "bytes_per_param",
    "draft_plan",
    "draft_shape",
    "draft_step_s",
    "speedup_by_batch",
    "verification_step_s",
    "verification_work",
]

EAGLE3_DRAFT_VOCAB = 32_000
"""Output vocabulary of the published EAGLE-3 heads (``draft_vocab_size``)."""
KERNELS_PER_DRAFT_LAYER = 8
"""Kernels of one draft layer (norm, QKV, attention, O, norm, gate-up, act, down), each at
least the kernel floor."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftShape:
    """The draft's size: parameters held, parameters read per forward, KV per token."""

    params: int
    """Held in memory (all GPUs of the replica together)."""
    dense_params: int
    """Read by every forward."""
    routed_params: int
    """Routed experts (MTP of an MoE model): read as the batch touches them."""
    num_experts: int
    experts_per_token: int
    layers: int
    """Decoder layers of the draft (each with KV)."""
    kv_bytes_per_token: int
    """Whole draft, all GPUs, at the target's KV dtype."""


def _per_layer(arch: Architecture) -> tuple[int, int, int]:
    """``(dense, routed, attention)`` parameters of one average decoder layer of ``arch``."""
    s = summarize(arch)
    c = s.parameters_by_component
    routed = c["experts_routed"]
    body = s.parameters_total - s.parameters_embedding - s.parameters_lm_head
    body -= arch.final_norm_params
    n = max(s.num_layers, 1)
    return (body - routed) // n, routed // n, c["attention"] // n


def draft_shape(spec: SpeculativeDecoding, target: Architecture, kv_dtype: str) -> DraftShape:
    """The draft of ``spec`` for ``target`` (n-gram: an empty one)."""
    s = summarize(target)
    h = target.hidden_size
    kv_kind = s.kv_bytes_per_token_unbounded
    layer_kv = kv_kind.get(kv_dtype, kv_kind.get("bf16", 0)) // max(s.num_layers, 1)
    if spec.method == "ngram":
        return DraftShape(
            params=0,
            dense_params=0,
            routed_params=0,
            num_experts=0,
            experts_per_token=0,
            layers=0,
            kv_bytes_per_token=0,
        )
    if spec.method == "draft_model":
        assert spec.draft is not None
        d = summarize(spec.draft)
        dkv = d.kv_bytes_per_token_unbounded
        routed = d.parameters_by_component["experts_routed"]
        return DraftShape(
            params=d.parameters_total,
            dense_params=d.parameters_total - routed,
            routed_params=routed,
            num_experts=d.num_experts,
            experts_per_token=d.experts_per_token,
            layers=d.num_layers,
            kv_bytes_per_token=dkv.get(kv_dtype, dkv.get("bf16", 0)),
        )
    dense, routed, attention = _per_layer(target)
    if spec.method == "mtp":
        layers = len(target.mtp_layers)
        total = s.parameters_mtp
        share = routed / max(dense + routed, 1)
        routed_mtp = int(total * share)
        head = s.parameters_lm_head or s.parameters_embedding  # shared with the target, read
        return DraftShape(
            params=total,
            dense_params=total - routed_mtp + head,
            routed_params=routed_mtp,
            num_experts=s.num_experts,
            experts_per_token=s.experts_per_token,
            layers=layers,
            kv_bytes_per_token=layers * layer_kv,
        )
    # EAGLE-3: one dense layer whose QKV read 2h inputs (the QKV projections once more:
    # attention − h·h for O), the 3h → h fusion and its own output head.
    if spec.draft_params is not None:
        params = spec.draft_params
    else:
        active = routed * s.experts_per_token // max(s.num_experts, 1)
        params = dense + active + (attention - h * h) + 3 * h * h + EAGLE3_DRAFT_VOCAB * h
    return DraftShape(
        params=params,
        dense_params=params,
        routed_params=0,
        num_experts=0,
        experts_per_token=0,
        layers=1,
        kv_bytes_per_token=layer_kv,
    )


def bytes_per_param(architecture: Architecture) -> float:
    """Bytes per parameter of a checkpoint: its quantized weight bits / 8, else 2 (16-bit)."""
    q = architecture.quantization
    bits = q.weight_bits if q is not None else None
    return bits / 8.0 if bits else 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftPlan:
    """A deployment's speculation with its draft sized: what the replica carries."""

    spec: SpeculativeDecoding
    shape: DraftShape
    bytes_per_param: float
    gpus: int
    """GPUs the draft is split over (the tensor-parallel ranks)."""
    target_layer_kv_bytes_per_token: int

    @property
    def weight_bytes_per_gpu(self) -> int:
        return math.ceil(self.shape.params * self.bytes_per_param / self.gpus)

    @property
    def kv_layers(self) -> int:
        """The draft's KV in layers of the target's KV shape (rounded up)."""
        per = self.target_layer_kv_bytes_per_token
        return math.ceil(self.shape.kv_bytes_per_token / per) if per else 0

    def draft_s(self, model: StepTimeModel, batch: np.ndarray, context: np.ndarray) -> np.ndarray:
        """:func:`draft_step_s` of this draft."""
        return draft_step_s(
            model,
            self.shape,
            self.spec,
            batch,
            context,
            bytes_per_param=self.bytes_per_param,
            gpus=self.gpus,
        )


def draft_plan(
    spec: SpeculativeDecoding, target: Architecture, tensor_parallel_size: int
) -> DraftPlan:
    """Size the draft of ``spec`` for ``target`` split over ``tensor_parallel_size`` GPUs."""
    s = summarize(target)
    kv = s.kv_bytes_per_token_unbounded.get("bf16", 0)
    return DraftPlan(
        spec=spec,
        shape=draft_shape(spec, target, "bf16"),
        bytes_per_param=bytes_per_param(spec.draft if spec.draft is not None else target),
        gpus=tensor_parallel_size,
        target_layer_kv_bytes_per_token=kv // max(s.num_layers, 1),
    )


def draft_step_s(
    model: StepTimeModel,
    shape: DraftShape,
    spec: SpeculativeDecoding,
    batch: np.ndarray,
    context: np.ndarray,
    *,
    bytes_per_param: float,
    gpus: int,
) -> np.ndarray:
    """The ``k`` draft forwards of a step with ``batch`` sequences of mean ``context`` tokens,
    in seconds per step (the roofline of the module docstring on the target's device rates)."""
    b = np.asarray(batch, dtype=np.float64)
    if shape.layers == 0 or spec.method == "ngram":
        return np.zeros_like(b)
    c = np.asarray(context, dtype=np.float64)
    rates = model.rates
    dtype = model.inventory.gemms[0].compute_dtype
    touched = (
        expected_experts_touched(
            b, num_experts=shape.num_experts, experts_per_token=shape.experts_per_token
        )
        / shape.num_experts
        if shape.routed_params and shape.num_experts
        else np.zeros_like(b)
    )
    read = shape.dense_params + shape.routed_params * touched
    active = shape.dense_params + (
        shape.routed_params * shape.experts_per_token / shape.num_experts
        if shape.num_experts
        else 0.0
    )
    flops = 2.0 * active * b / gpus
    nbytes = (read * bytes_per_param + b * c * shape.kv_bytes_per_token) / gpus
    forward = np.maximum(rates.compute_time_s(flops, dtype), rates.memory_time_s(nbytes))
    floor = shape.layers * KERNELS_PER_DRAFT_LAYER * rates.kernel_floor_s
    return np.asarray(spec.k * (forward + floor) * (b > 0), dtype=np.float64)


def verification_work(batch: np.ndarray, context: np.ndarray, k: int) -> StepWork:
    """``B`` sequences verifying ``1 + k`` tokens after ``context`` cached ones each."""
    b = np.asarray(batch, dtype=np.float64)
    c = np.maximum(np.asarray(context, dtype=np.float64), 1.0)
    zero = np.zeros_like(b)
    return StepWork(
        prefill_tokens=zero,
        prefill_sequences=zero,
        prefill_cached_tokens=zero,
        prefill_attention_pairs=zero,
        decode_sequences=b * (1 + k),
        decode_context_tokens=b * (c + k),
    )


def verification_step_s(
    model: StepTimeModel, batch: np.ndarray, context: np.ndarray, k: int
) -> np.ndarray:
    """Target time of a verification step (no draft)."""
    return np.asarray(model.step_time(verification_work(batch, context, k)).total_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedupPoint:
    """Decode at one batch size with and without speculation (pure-decode steps)."""

    batch_size: int
    decode_step_s: float
    """A plain decode step of the batch: also the plain TPOT."""
    verification_step_s: float
    """The target over ``1 + k`` tokens per sequence."""
    draft_s: float
    """The draft's ``k`` forwards."""
    tpot_s: float
    """``(verification + draft) / E``."""
    speedup: float
    """``decode_step / tpot``; below 1 speculation costs more than it gains."""


def speedup_by_batch(
    model: StepTimeModel,
    spec: SpeculativeDecoding,
    shape: DraftShape,
    *,
    context_tokens: float,
    batch_sizes: list[int],
    bytes_per_param: float,
    gpus: int,
) -> list[SpeedupPoint]:
    """Speculation's decode speed-up ``E · τ_dec(B) / (τ_ver(B) + τ_draft(B))`` at each batch
    size, every sequence attending to ``context_tokens``."""
    b = np.asarray(batch_sizes, dtype=np.float64)
    c = np.full_like(b, max(context_tokens, 1.0))
    plain = np.asarray(model.step_time(StepWork.decode(b, c)).total_s)
    verify = verification_step_s(model, b, c, spec.k)
    draft = draft_step_s(model, shape, spec, b, c, bytes_per_param=bytes_per_param, gpus=gpus)
    e = spec.expected_tokens
    out = []
    for i, size in enumerate(batch_sizes):
        tpot = float(verify[i] + draft[i]) / e
        out.append(
            SpeedupPoint(
                batch_size=size,
                decode_step_s=float(plain[i]),
                verification_step_s=float(verify[i]),
                draft_s=float(draft[i]),
                tpot_s=tpot,
                speedup=float(plain[i]) / tpot if tpot > 0 else math.inf,
            )
        )
    return out
