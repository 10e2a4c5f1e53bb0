"""/v1/sizing with serving features: candidates.speculative and candidates.kv_offload,
traffic.prefix and traffic.sessions; 422s that name the field."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.core.memory import Deployment
from servesize.core.replica import compile_replica
from servesize.core.steptime import StepWork
from tests.core.sizing.fixtures import H100, LLAMA_8B
from tests.core.sizing.test_sizing_features import EAGLE, _per_token_s, _step_s

EAGLE_IN = {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.8}
CANDIDATES = {
    "hardware": ["h100-sxm"],
    "tensor_parallel": [1],
    "max_num_batched_tokens": [8192],
    "kv_cache_dtype": ["auto"],
    "max_model_len": [2048],
}


def _body(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B",
        "traffic": {"rate_per_s": 0.5, "input_tokens": 512, "output_tokens": 256},
        "slo": {"ttft_s": {"mean": 2.0}},
        "candidates": CANDIDATES,
        "prices": {"h100-sxm": 2.0},
        "verify_top": 0,
    }
    return body | kw


def test_sizing_chooses_speculation_under_a_tight_tpot(client: TestClient) -> None:
    replica = compile_replica(
        LLAMA_8B,
        H100,
        Deployment(max_model_len=2048, max_num_batched_tokens=8192),
        speculative=EAGLE,
    )
    plain = _step_s(replica, StepWork.decode(1, 640))
    fast = _per_token_s(replica, EAGLE, 1, 640)
    body = _body(
        slo={"tpot_s": {"mean": (plain * fast) ** 0.5}},
        candidates=CANDIDATES | {"speculative": [None, EAGLE_IN]},
    )
    response = client.post("/v1/sizing", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    best = answer["plans"][0]
    assert best["speculative"]["expected_tokens_per_step"] == pytest.approx((1 - 0.8**4) / 0.2)
    assert "--speculative-config" in best["engine_args"]["vllm"]
    assert "Speculative decoding chosen" in answer["explanation"]
    assert answer["rejected"][0]["reason"] == "infeasible-at-zero-load"


def test_sizing_sessions_and_prefix_traffic(client: TestClient) -> None:
    sessions = {"sessions_per_s": 1.0, "turns": 3, "new_tokens": 100, "output_tokens": 50}
    response = client.post("/v1/sizing", json=_body(traffic={"sessions": sessions}))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["target_rate_per_s"] == 3.0  # λ_sess · E[T]
    # Mean prompt 250, history 150: 144 tokens in whole 16-token blocks.
    assert answer["plans"][0]["notes"][0].startswith("prefix cache: 144 prompt tokens")
    prefixed = _body(
        traffic={
            "rate_per_s": 0.5,
            "input_tokens": 1000,
            "output_tokens": 16,
            "prefix": {"shared_prefix_tokens": 992},
        },
        candidates=CANDIDATES | {"kv_offload": [None, {"size_gib": 16}]},
    )
    response = client.post("/v1/sizing", json=prefixed)
    assert response.status_code == 200, response.text
    best = response.json()["plans"][0]
    assert best["kv_offload"] is None  # one prefix stays on the GPU: the host tier buys nothing
    assert best["notes"][0].startswith("prefix cache: 992 prompt tokens")


def test_sizing_feature_fields_are_422s_naming_the_field(client: TestClient) -> None:
    both = _body(traffic={"rate_per_s": 1.0, "sessions": {"sessions_per_s": 1.0}})
    response = client.post("/v1/sizing", json=both)
    assert response.status_code == 422
    assert "exactly one of rate_per_s and sessions" in response.text
    draft = _body(
        candidates=CANDIDATES
        | {
            "speculative": [
                {"method": "draft_model", "num_speculative_tokens": 2, "acceptance_rate": 0.5}
            ]
        }
    )
    response = client.post("/v1/sizing", json=draft)
    assert response.status_code == 422
    pointers = [e["pointer"] for e in response.json()["errors"]]
    assert pointers == ["/candidates/speculative/0/method"]


def test_a_dumped_sessions_body_validates_again() -> None:
    from servesize.schemas.sizing import SizingRequest

    body = _body(traffic={"sessions": {"sessions_per_s": 2.0, "turns": 4}})
    request = SizingRequest.model_validate(body)
    again = SizingRequest.model_validate(request.model_dump(mode="json"))
    assert again.traffic.request_rate_per_s == 8.0  # 2 sessions/s × 4 turns
