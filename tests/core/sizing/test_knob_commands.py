"""Every knob a plan assumed reaches its engine's command: speculative decoding, the host KV
tier and prefix caching, on every node of a multi-node replica, parsed by the engines' own
option tables (vLLM 0.21.0, SGLang 0.5.1, TensorRT-LLM 1.0) with the values read back.

The expected values are written out here from the engines' documented forms, not taken from
the code under test: vLLM ``--speculative-config '{"method", "model",
"num_speculative_tokens"}'``; SGLang ``--speculative-algorithm EAGLE3`` with ``num_steps = k``,
``eagle_topk = 1`` and ``num_draft_tokens = k + 1`` (a chain of ``k`` drafts plus the root);
TensorRT-LLM ``speculative_config`` keyed by ``decoding_type`` (``DecodingBaseConfig.from_dict``).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from servesize.core.memory import (
    Deployment,
    InvalidDeploymentError,
    KVOffload,
    MemoryPlan,
    host_kv_tier,
    plan_memory,
)
from servesize.core.sizing import LaunchPlan, launch_plan
from servesize.core.sizing.engine_args import unsupported_speculative
from servesize.core.speculative import SpeculativeDecoding
from tests.core.sizing.fixtures import GPUS, LLAMA_8B
from tests.core.sizing.test_engine_commands import SGLANG, TRTLLM, TRTLLM_DOC, VLLM

H100 = GPUS["h100-sxm"]
DRAFT = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
VLLM_METHODS = {"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3"}
VLLM_METHODS |= {"mtp", "deepseek_mtp", "ngram_gpu"}
"""A subset of ``SpeculativeMethod`` in ``vllm/config/speculative.py`` (the plain methods,
``EagleModelTypes`` and, of ``MTPModelTypes``, the generic ``mtp`` and ``deepseek_mtp``)."""


def _memory(engine: str, *, tp: int = 1, dp: int = 1, **knobs: Any) -> MemoryPlan:
    dep = Deployment(
        engine=engine,
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        max_model_len=4096,
        max_num_batched_tokens=8192,
        **knobs,
    )
    memory = plan_memory(LLAMA_8B, H100, dep)
    assert memory.fits
    return memory


def _launch(engine: str, spec: SpeculativeDecoding | None = None, **kw: Any) -> LaunchPlan:
    return launch_plan(
        "meta-llama/Llama-3.1-8B",
        _memory(engine, **kw),
        is_moe=False,
        gpus_per_node=8,
        speculative=spec,
    )


def _vllm(plan: LaunchPlan) -> list[Any]:
    return [VLLM.parse_args(list(c.argv[2:])) for c in plan.commands if c.role != "router"]


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("eagle3", {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3}),
        ("draft_model", {"method": "draft_model", "model": DRAFT, "num_speculative_tokens": 3}),
        ("mtp", {"method": "mtp", "num_speculative_tokens": 3}),
        (
            "ngram",
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 4,
                "prompt_lookup_min": 1,
            },
        ),
    ],
)
def test_vllm_speculative_config_round_trips(method: str, expected: dict[str, Any]) -> None:
    draft = DRAFT if method in ("eagle3", "draft_model") else None
    spec = SpeculativeDecoding.of(method, 3, acceptance_rate=0.7, draft_model=draft)  # type: ignore[arg-type]
    (ns,) = _vllm(_launch("vllm", spec))
    assert ns.speculative_config == expected
    assert ns.speculative_config["method"] in VLLM_METHODS
    assert ns.model_tag == "meta-llama/Llama-3.1-8B"


def test_every_node_of_a_16_gpu_vllm_replica_carries_the_knobs() -> None:
    """TP8 x DP2 over two 8-GPU nodes: both nodes' commands carry the same speculation, host
    tier (the replica's 64 GiB) and prefix-caching switch."""
    spec = SpeculativeDecoding.of("eagle3", 2, acceptance_rate=0.8, draft_model=DRAFT)
    plan = _launch(
        "vllm",
        spec,
        tp=8,
        dp=2,
        enable_prefix_caching=False,
        kv_offload=KVOffload(size_gib=64, backend="native"),
    )
    parsed = _vllm(plan)
    assert len(parsed) == 2
    for ns in parsed:
        assert ns.tensor_parallel_size * ns.data_parallel_size == 16
        assert ns.speculative_config == {
            "method": "eagle3",
            "model": DRAFT,
            "num_speculative_tokens": 2,
        }
        assert (ns.kv_offloading_size, ns.kv_offloading_backend) == (64.0, "native")
        assert ns.enable_prefix_caching is False
    assert [ns.headless for ns in parsed] == [False, True]


def test_sglang_eagle3_and_hierarchical_cache_parse() -> None:
    spec = SpeculativeDecoding.of("eagle3", 4, acceptance_rate=0.7, draft_model=DRAFT)
    plan = _launch("sglang", spec, kv_offload=KVOffload(hicache_ratio=3.0))
    (cmd,) = plan.commands
    ns = SGLANG.parse_args(list(cmd.argv[3:]))
    assert ns.speculative_algorithm == "EAGLE3"
    assert ns.speculative_draft_model_path == DRAFT
    assert (ns.speculative_num_steps, ns.speculative_eagle_topk) == (4, 1)
    assert ns.speculative_num_draft_tokens == 5
    assert ns.enable_hierarchical_cache is True
    assert ns.hicache_ratio == 3.0
    assert ns.disable_radix_cache is False


@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_sglang_without_the_algorithm_is_refused_with_the_reason(method: str) -> None:
    spec = SpeculativeDecoding.of(method, 3, acceptance_rate=0.5, draft_model="org/draft")  # type: ignore[arg-type]
    reason = unsupported_speculative("sglang", spec)
    assert reason is not None
    assert method in reason
    assert "0.5.1" in reason
    with pytest.raises(ValueError, match=method):
        _launch("sglang", spec)
    assert unsupported_speculative("vllm", spec) is None
    assert unsupported_speculative("trtllm", spec) is None


def _trtllm_yaml(plan: LaunchPlan) -> tuple[Any, dict[str, Any]]:
    (cmd,) = plan.commands
    ns = TRTLLM.parse_args(list(cmd.argv[1:]))
    return ns, yaml.safe_load(dict(cmd.files)[ns.extra_llm_api_options])


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        (
            "eagle3",
            {
                "decoding_type": "Eagle",
                "max_draft_len": 3,
                "speculative_model_dir": DRAFT,
                "eagle3_one_model": True,
            },
        ),
        ("mtp", {"decoding_type": "MTP", "num_nextn_predict_layers": 3}),
        ("ngram", {"decoding_type": "NGram", "max_draft_len": 3, "max_matching_ngram_size": 4}),
        (
            "draft_model",
            {"decoding_type": "DraftTarget", "max_draft_len": 3, "speculative_model_dir": DRAFT},
        ),
    ],
)
def test_trtllm_speculative_config_is_a_decoding_config_of_the_release(
    method: str, expected: dict[str, Any]
) -> None:
    draft = DRAFT if method in ("eagle3", "draft_model") else None
    spec = SpeculativeDecoding.of(method, 3, acceptance_rate=0.7, draft_model=draft)  # type: ignore[arg-type]
    _, options = _trtllm_yaml(_launch("trtllm", spec))
    config = options["speculative_config"]
    assert config == expected
    classes = TRTLLM_DOC["llm_args"]
    assert config["decoding_type"] in classes["DecodingBaseConfig"]["decoding_types"]
    cls = {"Eagle": "Eagle", "MTP": "MTP", "NGram": "NGram", "DraftTarget": "DraftTarget"}
    fields = classes[f"{cls[config['decoding_type']]}DecodingConfig"]["fields"]
    assert set(config) - {"decoding_type"} <= set(fields)


def test_trtllm_host_cache_is_pinned_in_bytes_per_rank() -> None:
    host = 32 * 2**30
    memory = _memory("trtllm", tp=2, kv_offload=KVOffload(host_cache_size_bytes=host))
    plan = launch_plan("m/x", memory, is_moe=False, gpus_per_node=8)
    ns, options = _trtllm_yaml(plan)
    assert ns.tensor_parallel_size == 2
    kv = options["kv_cache_config"]
    assert kv["host_cache_size"] == host
    assert kv["enable_block_reuse"] is True
    assert set(kv) <= set(TRTLLM_DOC["llm_args"]["KvCacheConfig"]["fields"])
    # Llama-3.1-8B at TP2 in bf16: 32 layers x 2 (K, V) x 4 KV heads x 128 x 2 B = 65536 B per
    # token per GPU; 32 tokens per block -> 2 MiB blocks; 32 GiB / 2 MiB = 16384 host blocks.
    offload = memory.deployment.kv_offload
    assert offload is not None
    tier = host_kv_tier(
        offload,
        hardware=H100,
        kv_bytes_per_token_per_gpu=memory.kv_bytes_per_token_per_gpu,
        block_size=memory.kv_block_size,
        device_tokens=memory.kv_capacity_tokens,
        tensor_parallel_size=2,
        pipeline_parallel_size=1,
    )
    assert memory.kv_bytes_per_token_per_gpu == 65536
    assert tier.blocks == host // (65536 * memory.kv_block_size)


def test_trtllm_host_cache_needs_block_reuse_and_its_own_field() -> None:
    with pytest.raises(InvalidDeploymentError, match="prefix caching"):
        _memory(
            "trtllm",
            enable_prefix_caching=False,
            kv_offload=KVOffload(host_cache_size_bytes=2**30),
        )
    with pytest.raises(InvalidDeploymentError, match="host_cache_size_bytes"):
        _memory("vllm", kv_offload=KVOffload(size_gib=8, host_cache_size_bytes=2**30))
    with pytest.raises(InvalidDeploymentError, match="host_cache_size_bytes"):
        _memory("trtllm", kv_offload=KVOffload(size_gib=8))


def test_the_plan_notes_name_the_speculation() -> None:
    spec = SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.8)
    plan = _launch("vllm", spec)
    # E = 1 + 0.8 + 0.64 + 0.512 = 2.952 tokens per verification step.
    assert any("eagle3" in n and "2.95 tokens" in n for n in plan.notes)
    assert any("<eagle3-head-checkpoint>" in n for n in plan.notes)
