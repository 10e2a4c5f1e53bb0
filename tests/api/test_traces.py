"""Uploaded traces: the summary against the file's own numbers, replay by id through
/v1/simulate equal to replaying the file inline, ownership, and bad files named by line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from servesize.security import Scope

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
AZURE = (DATA / "azure_llm_conv_head.csv").read_text()
MODEL = "meta-llama/Llama-3.1-8B"


def _auth(
    create_key: Callable[..., str], *scopes: Scope, name: str | None = None
) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_key(*scopes, name=name)}"}


def test_upload_summarise_replay_delete(client: TestClient, create_key: Callable[..., str]) -> None:
    owner = _auth(create_key, Scope.TRACES_WRITE)
    created = client.post(
        "/v1/traces", json={"format": "azure", "file": AZURE, "name": "conv"}, headers=owner
    )
    assert created.status_code == 201, created.text
    body = created.json()
    trace_id = body["id"]
    assert created.headers["location"] == f"/v1/traces/{trace_id}"
    # 8 requests over 18:15:46.6805900 … 18:15:54.9320210 = 8.251431 s: 7 / 8.251431 per s.
    assert body["requests"] == 8
    assert body["duration_s"] == pytest.approx(8.251431, abs=1e-6)
    assert body["rate_per_s"] == pytest.approx(7 / 8.251431)
    inputs = [374, 396, 879, 91, 91, 381, 1313, 388]
    assert body["input_tokens"]["mean"] == pytest.approx(sum(inputs) / 8)
    assert (body["input_tokens"]["min"], body["input_tokens"]["max"]) == (91, 1313)
    # Sorted inputs 91 91 374 381 388 396 879 1313: the median is (381 + 388) / 2.
    assert body["input_tokens"]["p50"] == pytest.approx(384.5)
    assert body["size_bytes"] == len(AZURE.encode())
    assert client.get(f"/v1/traces/{trace_id}").json() == body

    base = {"model": MODEL, "hardware": "h100-sxm"}
    by_id = client.post("/v1/simulate", json=base | {"traffic": {"trace_id": trace_id}})
    assert by_id.status_code == 200, by_id.text
    inline = client.post(
        "/v1/simulate", json=base | {"traffic": {"trace": {"format": "azure", "file": AZURE}}}
    )
    assert by_id.json()["ttft_s"] == inline.json()["ttft_s"]
    assert by_id.json()["measured"] == 8

    other = _auth(create_key, Scope.TRACES_WRITE, name="other")
    assert client.delete(f"/v1/traces/{trace_id}", headers=other).status_code == 403
    assert client.delete(f"/v1/traces/{trace_id}", headers=owner).status_code == 204
    assert client.get(f"/v1/traces/{trace_id}").status_code == 404
    gone = client.post("/v1/simulate", json=base | {"traffic": {"trace_id": trace_id}})
    assert gone.status_code == 404


def test_a_bad_row_is_a_422_naming_its_line(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    bad = AZURE.replace("879,55", "879,x")  # data row 3 is file line 4
    response = client.post(
        "/v1/traces",
        json={"format": "azure", "file": bad},
        headers=_auth(create_key, Scope.TRACES_WRITE),
    )
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["pointer"] == "/file"
    assert "line 4" in error["detail"]


def test_upload_needs_the_scope_and_a_known_format(
    client: TestClient, create_key: Callable[..., str]
) -> None:
    payload = {"format": "azure", "file": AZURE}
    assert client.post("/v1/traces", json=payload).status_code == 401
    wrong = _auth(create_key, Scope.PLANS_WRITE)
    assert client.post("/v1/traces", json=payload, headers=wrong).status_code == 403
    unknown = client.post(
        "/v1/traces",
        json={"format": "parquet", "file": AZURE},
        headers=_auth(create_key, Scope.TRACES_WRITE, name="u"),
    )
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["pointer"] == "/format"


def test_trace_id_is_checked_like_a_trace(client: TestClient) -> None:
    base = {"model": MODEL, "hardware": "h100-sxm"}
    both = client.post(
        "/v1/simulate",
        json=base
        | {
            "traffic": {
                "trace_id": "trc_0123456789abcdef",
                "trace": {"format": "azure", "file": AZURE},
            }
        },
    )
    assert both.status_code == 422
    closed = client.post(
        "/v1/simulate",
        json=base | {"traffic": {"trace_id": "trc_0123456789abcdef", "mode": "closed_loop"}},
    )
    assert closed.status_code == 422
    malformed = client.post("/v1/simulate", json=base | {"traffic": {"trace_id": "x"}})
    assert malformed.status_code == 422
    assert malformed.json()["errors"][0]["pointer"] == "/traffic/trace_id"
