"""/v1/models: the catalogue, inspection, custom registration — on both databases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.security import Scope

MODELS_DIR = Path(__file__).resolve().parents[2] / "servesize" / "data" / "models"

# Llama-3.1-8B by hand: per layer q,o 2·4096·4096 + k,v 2·4096·1024 + MLP 3·4096·14336
# + 2 norms of 4096 = 218,112,000; × 32 layers = 6,979,584,000; + embedding and lm_head
# 2·128256·4096 = 1,050,673,152; + final norm 4096 → 8,030,261,248.
LLAMA_8B_PARAMETERS = 8_030_261_248
# 2 (K and V) · 32 layers · 8 KV heads · 128 head_dim · 2 bytes (bf16).
LLAMA_8B_KV_BYTES_PER_TOKEN_BF16 = 131_072


def llama_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads((MODELS_DIR / "meta-llama--Llama-3.1-8B.json").read_text())
    return config


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_catalogue_lists_every_file(client: TestClient) -> None:
    page = client.get("/v1/models", params={"limit": 500}).json()
    files = sorted(MODELS_DIR.glob("*.json"))
    assert page["total"] == len(files) >= 25
    assert {i["id"] for i in page["items"]} >= {
        "meta-llama/Llama-3.1-8B",
        "deepseek-ai/DeepSeek-V3",
    }


def test_filters(client: TestClient) -> None:
    moe = client.get("/v1/models", params={"type": "moe", "limit": 500}).json()["items"]
    assert "mistralai/Mixtral-8x7B-v0.1" in {i["id"] for i in moe}
    assert all("moe" in i["tags"] for i in moe)
    llama = client.get("/v1/models", params={"family": "llama", "limit": 500}).json()["items"]
    assert "meta-llama/Llama-3.1-8B" in {i["id"] for i in llama}
    assert "openai/gpt-oss-20b" not in {i["id"] for i in llama}


def test_get_catalogue_model_returns_config_and_summary(client: TestClient) -> None:
    response = client.get("/v1/models/meta-llama/Llama-3.1-8B")
    assert response.status_code == 200
    body = response.json()
    assert body["config"] == llama_config()  # verbatim
    assert body["source"] == "catalogue"
    summary = body["summary"]
    assert summary["parameters_total"] == LLAMA_8B_PARAMETERS
    assert summary["parameters_active"] == LLAMA_8B_PARAMETERS
    assert summary["num_layers"] == 32
    assert summary["layer_kinds"] == {"full_attention": 32}
    assert summary["kv_bytes_per_token"]["bf16"] == LLAMA_8B_KV_BYTES_PER_TOKEN_BF16


def test_unknown_model_is_404(client: TestClient) -> None:
    response = client.get("/v1/models/nobody/nothing")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


def test_inspect_counts_an_inline_config(client: TestClient) -> None:
    response = client.post("/v1/models/inspect", json={"hf_config": llama_config()})
    assert response.status_code == 200
    assert response.json()["parameters_total"] == LLAMA_8B_PARAMETERS


def test_inspect_reports_each_missing_field(client: TestClient) -> None:
    config = llama_config()
    del config["num_attention_heads"]
    del config["vocab_size"]
    config["model_type"] = "brand-new-arch"
    config["architectures"] = ["BrandNewForCausalLM"]
    response = client.post("/v1/models/inspect", json={"hf_config": config})
    assert response.status_code == 422
    body = response.json()
    assert body["type"].endswith("invalid-architecture")
    pointers = {e["pointer"] for e in body["errors"]}
    assert {"/hf_config/num_attention_heads", "/hf_config/vocab_size"} <= pointers


def test_inspect_reports_inconsistent_heads(client: TestClient) -> None:
    config = llama_config() | {"num_key_value_heads": 7}
    response = client.post("/v1/models/inspect", json={"hf_config": config})
    assert response.status_code == 422
    (error,) = response.json()["errors"]
    assert error["pointer"] in {"/hf_config/num_attention_heads", "/hf_config/num_key_value_heads"}
    assert "num_key_value_heads" in error["detail"]


def test_inspect_states_its_assumptions(client: TestClient) -> None:
    config = llama_config()
    del config["num_key_value_heads"]  # MHA is the documented default
    body = client.post("/v1/models/inspect", json={"hf_config": config}).json()
    assert body["kv_bytes_per_token"]["bf16"] == 2 * 32 * 32 * 128 * 2
    assert any("num_key_value_heads" in a for a in body["assumptions"])


def test_register_get_and_delete_custom_model(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    writer = bearer(create_key(Scope.MODELS_WRITE))
    config = llama_config() | {"num_hidden_layers": 16}
    created = client.post(
        "/v1/models", json={"id": "acme/llama-16l", "hf_config": config}, headers=writer
    )
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/models/acme/llama-16l"
    # 16 layers × 218,112,000 + 1,050,673,152 + 4096
    assert created.json()["summary"]["parameters_total"] == 16 * 218_112_000 + 1_050_677_248

    fetched = client.get("/v1/models/acme/llama-16l").json()
    assert fetched["source"] == "custom"
    assert fetched["config"] == config
    listed = client.get("/v1/models", params={"limit": 500}).json()["items"]
    assert "acme/llama-16l" in {i["id"] for i in listed}

    again = client.post(
        "/v1/models", json={"id": "acme/llama-16l", "hf_config": config}, headers=writer
    )
    assert again.status_code == 409
    assert client.delete("/v1/models/acme/llama-16l", headers=writer).status_code == 204
    assert client.get("/v1/models/acme/llama-16l").status_code == 404
    assert client.delete("/v1/models/acme/llama-16l", headers=writer).status_code == 404


def test_catalogue_ids_are_taken_and_read_only(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    writer = bearer(create_key(Scope.MODELS_WRITE))
    taken = client.post(
        "/v1/models",
        json={"id": "meta-llama/Llama-3.1-8B", "hf_config": llama_config()},
        headers=writer,
    )
    assert taken.status_code == 409
    assert client.delete("/v1/models/meta-llama/Llama-3.1-8B", headers=writer).status_code == 409


@pytest.mark.parametrize(("scope", "expected"), [(None, 401), (Scope.PROFILES_WRITE, 403)])
def test_registration_needs_models_write(
    client: TestClient, create_key: Callable[..., str], scope: Scope | None, expected: int
) -> None:
    headers = bearer(create_key(scope)) if scope else {}
    response = client.post(
        "/v1/models", json={"id": "a/b", "hf_config": llama_config()}, headers=headers
    )
    assert response.status_code == expected


def test_invalid_custom_model_is_not_stored(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    writer = bearer(create_key(Scope.MODELS_WRITE))
    config = llama_config() | {"hidden_size": -1}
    response = client.post("/v1/models", json={"id": "a/bad", "hf_config": config}, headers=writer)
    assert response.status_code == 422
    assert "/hf_config/hidden_size" in {e["pointer"] for e in response.json()["errors"]}
    assert client.get("/v1/models/a/bad").status_code == 404
