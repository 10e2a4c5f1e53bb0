"""Sizing chooses speculative decoding, KV offload and prefix caching where they pay, and says
why it does not elsewhere. Every expected choice is derived from closed forms and step costs
of the compiled model (``StepWork`` steps), not from the search's output:

- speculation: ``E = (1 − α^{k+1})/(1 − α)`` and the per-token cost ``(τ_ver + τ_draft)/E``
  against a plain decode step ``τ_dec``;
- prefix hits: ``⌊min(S, P − 1)/b⌋·b`` tokens for a prefix every request shares;
- offload: a GPU pool of ``C`` blocks holds at most ``C/(K·S_b)`` of ``K`` prefixes of ``S_b``
  blocks (pinned or cached), a host tier far larger than the working set holds them all, and a
  block loads in ``b · kv_bytes_per_token / link``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servesize.core.memory import Deployment, KVOffload
from servesize.core.replica import Replica, compile_replica
from servesize.core.sizing import SearchSpace, SizingTraffic, explain, size
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.speculative import SpeculativeDecoding, draft_step_s
from servesize.core.steptime import StepWork
from servesize.core.traffic import FixedLength, PrefixTraffic, SessionTraffic
from tests.core.sizing.fixtures import H100, LLAMA_8B

EAGLE = SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.8)
WEAK_EAGLE = SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.5)


def _step_s(replica: Replica, work: StepWork) -> float:
    return float(replica.step_model.step_time(work).total_s[0])


def _per_token_s(replica: Replica, spec: SpeculativeDecoding, batch: int, ctx: float) -> float:
    """``(τ_ver(B) + τ_draft(B)) / E`` with ``E`` in closed form; the verification is ``B(1+k)``
    decode rows, each sequence's KV read once (``Σc + B·k`` context tokens)."""
    k, alpha = spec.k, spec.acceptance[0]
    e = (1 - alpha ** (k + 1)) / (1 - alpha)
    verify = StepWork(
        prefill_tokens=np.zeros(1),
        prefill_sequences=np.zeros(1),
        prefill_cached_tokens=np.zeros(1),
        prefill_attention_pairs=np.zeros(1),
        decode_sequences=np.array([batch * (1.0 + k)]),
        decode_context_tokens=np.array([batch * (ctx + k)]),
    )
    draft = replica.draft
    assert draft is not None
    drafting = draft_step_s(
        replica.step_model,
        draft.shape,
        spec,
        np.array([float(batch)]),
        np.array([ctx]),
        bytes_per_param=draft.bytes_per_param,
        gpus=draft.gpus,
    )
    return (_step_s(replica, verify) + float(drafting[0])) / e


def _space(**kw: object) -> SearchSpace:
    fields: dict[str, object] = {
        "tensor_parallel": (1,),
        "max_num_batched_tokens": (8192,),
        "kv_cache_dtype": ("auto",),
        "max_model_len": (4096,),
    }
    return SearchSpace(hardware=(H100,), **(fields | kw))  # type: ignore[arg-type]


def _target(metric: str, limit_s: float) -> ServiceLevelObjective:
    return ServiceLevelObjective(
        targets=(LatencyTarget(metric=metric, statistic="mean", limit_s=limit_s),)  # type: ignore[arg-type]
    )


def test_speculation_is_chosen_when_only_it_meets_a_tight_tpot_at_low_load() -> None:
    p, n = 512, 256
    deployment = Deployment(max_model_len=4096, max_num_batched_tokens=8192)
    replica = compile_replica(LLAMA_8B, H100, deployment, speculative=EAGLE)
    ctx = p + n / 2
    plain = _step_s(replica, StepWork.decode(1, ctx))
    fast = _per_token_s(replica, EAGLE, 1, ctx)
    assert fast < plain / 2  # E = 2.952: the draft and the 4-row step cost less than 1.5 steps
    limit = (plain * fast) ** 0.5  # between them, ~40 % from each
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space(speculative=(None, EAGLE)),
        traffic=SizingTraffic(
            rate_per_s=0.5, input_tokens=FixedLength(p), output_tokens=FixedLength(n)
        ),
        objective=_target("tpot", limit),
        prices={"h100-sxm": 2.0},
        verify_top=0,
    )
    best = result.plans[0]
    assert best.candidate.speculative == EAGLE
    (plain_candidate,) = result.rejected
    assert plain_candidate.candidate.speculative is None
    assert plain_candidate.reason == "infeasible-at-zero-load"
    assert best.tier_a is not None
    # One request alone: the TPOT is the per-token cost of a verification step of one.
    assert best.tier_a.tpot_p50_s == pytest.approx(fast, rel=0.05)
    text = explain(result)
    assert "Speculative decoding chosen: no candidate without it is a plan" in text
    assert "E = 2.952" in text


def test_speculation_is_not_chosen_past_its_break_even_batch() -> None:
    p, n, seqs = 256, 256, 256
    deployment = Deployment(max_model_len=4096, max_num_batched_tokens=8192, max_num_seqs=seqs)
    replica = compile_replica(LLAMA_8B, H100, deployment, speculative=WEAK_EAGLE)
    ctx = p + n / 2
    # E = (1 − 0.5⁴)/0.5 = 1.875; at the full batch a token costs more with the draft.
    speedup = _step_s(replica, StepWork.decode(seqs, ctx)) / _per_token_s(
        replica, WEAK_EAGLE, seqs, ctx
    )
    assert speedup < 0.9
    even = next(
        b
        for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)
        if _step_s(replica, StepWork.decode(b, ctx)) < _per_token_s(replica, WEAK_EAGLE, b, ctx)
    )
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space(max_num_seqs=(seqs,), speculative=(None, WEAK_EAGLE)),
        traffic=SizingTraffic(
            rate_per_s=200.0, input_tokens=FixedLength(p), output_tokens=FixedLength(n)
        ),
        objective=_target("tpot", 0.5),
        prices={"h100-sxm": 2.0},
        verify_top=0,
    )
    best = result.plans[0]
    assert best.candidate.speculative is None
    (drafted,) = [p for p in result.plans if p.candidate.speculative is not None]
    # Throughput-bound (saturation binds both): the speculating replica serves less.
    assert best.binding == drafted.binding == "saturation"
    assert drafted.max_rate_per_replica_per_s < best.max_rate_per_replica_per_s
    assert drafted.replicas >= best.replicas
    text = explain(result)
    assert "Speculative decoding not chosen" in text
    assert f"it stops paying from a batch of {even}" in text


def test_a_shared_system_prompt_halves_the_gpus_under_a_ttft_slo() -> None:
    p, shared = 4096, 3968
    one = compile_replica(LLAMA_8B, H100, Deployment(max_model_len=8192))
    two = compile_replica(LLAMA_8B, H100, Deployment(max_model_len=8192, tensor_parallel_size=2))
    z = one.step_model.engine.request_overhead_s
    hit = shared // 16 * 16  # ⌊min(S, P − 1)/b⌋·b with vLLM's 16-token blocks: 3968
    cold_tp1 = _step_s(one, StepWork.prefill(p))
    cold_tp2 = _step_s(two, StepWork.prefill(p))
    warm_tp1 = _step_s(one, StepWork.prefill(p - hit))
    limit = z + (cold_tp1 + cold_tp2) / 2
    assert warm_tp1 < cold_tp2 < cold_tp1
    kw = {
        "space": _space(tensor_parallel=(1, 2), max_model_len=(8192,)),
        "objective": _target("ttft", limit),
        "prices": {"h100-sxm": 2.0},
        "verify_top": 0,
    }
    base = SizingTraffic(rate_per_s=0.5, input_tokens=FixedLength(p), output_tokens=FixedLength(16))
    cold = size(LLAMA_8B, model_name="m", traffic=base, **kw)  # type: ignore[arg-type]
    warm = size(
        LLAMA_8B,
        model_name="m",
        traffic=replace(base, prefix=PrefixTraffic(shared_prefix_tokens=shared)),
        **kw,  # type: ignore[arg-type]
    )
    # Without the cache only TP2 prefills 4096 tokens in time; with it TP1 prefills 128.
    assert (cold.plans[0].total_gpus, warm.plans[0].total_gpus) == (2, 1)
    assert f"{hit} prompt tokens per request served cached" in warm.plans[0].notes[0]
    launch = warm.plans[0].launch
    assert launch is not None
    assert any("credits the traffic's prefix hits" in n for n in launch.notes)


def _offload_case(
    link_bytes_per_s: int,
) -> tuple[Replica, float, int, int]:
    """Llama-3.1-8B on a small GPU pool: 32 prompts of 2,048 shared tokens (128 blocks each)
    and 64 own tokens. Returns the replica, the per-block host load and the pool and host
    blocks."""
    hardware = replace(H100, host_link_bytes_per_s=link_bytes_per_s)
    offload = KVOffload(size_gib=64.0)
    replica = compile_replica(
        LLAMA_8B,
        hardware,
        Deployment(max_model_len=4096, gpu_memory_utilization=0.3, kv_offload=offload),
    )
    kv_bytes = replica.memory.kv_bytes_per_token_per_gpu
    assert kv_bytes == 2 * 8 * 128 * 2 * 32  # K and V, 8 KV heads of 128, bf16, 32 layers
    block_load_s = 16 * kv_bytes / link_bytes_per_s
    host_blocks = int(64 * 2**30 // (16 * kv_bytes))
    return replica, block_load_s, replica.memory.kv_blocks, host_blocks


PREFIXES = PrefixTraffic(shared_prefix_tokens=2048, num_prefixes=32)


def _offload_sizing(hardware_link: int, limit_s: float) -> object:
    return size(
        LLAMA_8B,
        model_name="m",
        space=SearchSpace(
            hardware=(replace(H100, host_link_bytes_per_s=hardware_link),),
            tensor_parallel=(1,),
            max_num_batched_tokens=(8192,),
            kv_cache_dtype=("auto",),
            max_model_len=(4096,),
            gpu_memory_utilization=(0.3,),
            kv_offload=(None, KVOffload(size_gib=64.0)),
        ),
        traffic=SizingTraffic(
            rate_per_s=0.5,
            input_tokens=FixedLength(2112),
            output_tokens=FixedLength(16),
            prefix=PREFIXES,
        ),
        objective=_target("ttft", limit_s),
        prices={"h100-sxm": 2.0},
        verify_top=0,
    )


def test_a_host_tier_makes_a_kv_bound_plan_feasible() -> None:
    replica, block_load_s, pool, host = _offload_case(50 * 10**9)
    working_set = 32 * 128
    assert pool < working_set / 2 < working_set < host
    # The GPU holds at most pool / working set of the prefixes (pinned or cached), so at
    # least 2112 − 2048·pool/working_set tokens are prefilled without the host tier; with it
    # (host ≫ working set + the requests' own blocks) 64, plus at most 128 block loads.
    z = replica.step_model.engine.request_overhead_s
    cold = _step_s(replica, StepWork.prefill(round(2112 - 2048 * pool / working_set)))
    warm = _step_s(replica, StepWork.prefill(64)) + 128 * block_load_s
    assert warm < cold
    result = _offload_sizing(50 * 10**9, z + (warm + cold) / 2)
    best = result.plans[0]  # type: ignore[attr-defined]
    assert best.candidate.kv_offload == KVOffload(size_gib=64.0)
    (without,) = result.rejected  # type: ignore[attr-defined]
    assert without.candidate.kv_offload is None
    assert without.reason == "infeasible-at-zero-load"
    assert "KV offload chosen" in explain(result)  # type: ignore[arg-type]


def test_a_slow_host_link_breaks_the_ttft_slo_so_offload_is_not_chosen() -> None:
    link = 10**9  # 1 GB/s: a block of 16 tokens × 128 KiB loads in 2.1 ms
    replica, block_load_s, pool, _ = _offload_case(link)
    assert block_load_s == pytest.approx(16 * 131072 / 1e9)
    z = replica.step_model.engine.request_overhead_s
    # Recomputing the whole prompt meets the limit; the host serves at least the share of
    # prefixes the GPU cannot hold, 1 − pool/working set of 128 blocks, and vLLM waits for it.
    whole = _step_s(replica, StepWork.prefill(2112))
    limit = z + 1.5 * whole
    loads = 128 * (1 - pool / (32 * 128)) * block_load_s
    assert loads > 1.5 * whole
    result = _offload_sizing(link, limit)
    best = result.plans[0]  # type: ignore[attr-defined]
    assert best.candidate.kv_offload is None
    (offloaded,) = result.rejected  # type: ignore[attr-defined]
    assert offloaded.reason == "infeasible-at-zero-load"
    assert "loaded from the host KV tier" in offloaded.detail
    assert "KV offload not chosen" in explain(result)  # type: ignore[arg-type]


def test_sessions_are_screened_on_their_means_and_verified_as_sessions() -> None:
    # Three turns of 100 new tokens and 50 out: prompts 100, 250, 400, mean 250, of which the
    # history is (100 + 50)·E[T(T−1)]/(2E[T]) = 150·6/6 = 150 tokens, cached in whole 16-token
    # blocks: 144. Requests arrive at λ_sess·E[T] = 1.0 × 3.
    sessions = SessionTraffic(
        sessions_per_s=1.0,
        turns=FixedLength(3),
        new_tokens=FixedLength(100),
        output_tokens=FixedLength(50),
        think_time_s=2.0,
    )
    traffic = SizingTraffic.of_sessions(sessions)
    assert traffic.input_tokens == FixedLength(250)
    result = size(
        LLAMA_8B,
        model_name="m",
        space=_space(),
        traffic=traffic,
        objective=_target("ttft", 1.0),
        prices={"h100-sxm": 2.0},
        verify_top=1,
    )
    assert result.target_rate_per_s == pytest.approx(3.0)
    best = result.plans[0]
    assert best.notes[0] == "prefix cache: 144 prompt tokens per request served cached"
    assert best.verified
    assert result.simulations >= 3
