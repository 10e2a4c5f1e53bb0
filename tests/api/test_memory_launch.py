"""``POST /v1/memory`` answers the engine's launch commands for the deployment, with its
speculation, host KV tier and prefix caching, parsed by the engines' option tables; what the
release cannot launch says why."""

from __future__ import annotations

from typing import Any

import yaml
from fastapi.testclient import TestClient

from tests.api.test_kv_offload import memory
from tests.core.sizing.test_engine_commands import SGLANG, TRTLLM, VLLM

EAGLE = {
    "method": "eagle3",
    "num_speculative_tokens": 3,
    "acceptance_rate": 0.8,
    "draft_model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
}


def _server(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["launch_unsupported"] is None
    (command,) = body["launch"]["commands"]
    return dict(command)


def test_vllm_command_carries_speculation_host_tier_and_prefix_caching(
    client: TestClient,
) -> None:
    deployment = {
        "max_model_len": 8192,
        "tensor_parallel_size": 2,
        "enable_prefix_caching": False,
        "kv_offload": {"size_gib": 64},
        "speculative": EAGLE,
    }
    command = _server(memory(client, deployment))
    ns = VLLM.parse_args(command["argv"][2:])
    assert ns.model_tag == "meta-llama/Llama-3.1-8B"
    assert ns.tensor_parallel_size == 2
    assert ns.max_model_len == 8192
    assert ns.enable_prefix_caching is False
    assert (ns.kv_offloading_size, ns.kv_offloading_backend) == (64.0, "native")
    assert ns.speculative_config == {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }


def test_sglang_and_trtllm_commands(client: TestClient) -> None:
    sglang = {"engine": "sglang", "max_model_len": 4096, "speculative": EAGLE}
    ns = SGLANG.parse_args(_server(memory(client, sglang))["argv"][3:])
    assert (ns.speculative_algorithm, ns.speculative_num_draft_tokens) == ("EAGLE3", 4)
    trtllm = {
        "engine": "trtllm",
        "max_model_len": 4096,
        "kv_offload": {"host_cache_size_bytes": 2**34},
    }
    command = _server(memory(client, trtllm))
    args = TRTLLM.parse_args(command["argv"][1:])
    options = yaml.safe_load(command["files"][0]["content"])
    assert command["files"][0]["path"] == args.extra_llm_api_options
    assert options["kv_cache_config"]["host_cache_size"] == 2**34


def test_what_the_release_cannot_launch_says_why(client: TestClient) -> None:
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.5}
    response = memory(client, {"engine": "sglang", "max_model_len": 4096, "speculative": ngram})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["launch"] is None
    assert "ngram" in body["launch_unsupported"]
    too_big = memory(client, {"max_model_len": 8192, "gpu_memory_utilization": 0.1})
    assert too_big.json()["fits"] is False
    assert too_big.json()["launch"] is None
    assert too_big.json()["launch_unsupported"].startswith("the deployment does not fit")
