"""Hardware profiles: datasheet seeding, custom profiles with ETags, measurement uploads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.db.seed import datasheet_entries
from servesize.security import Scope


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def gemm_row(dtype: str, m: int, n: int, k: int, tflop_per_s: float) -> dict[str, Any]:
    return {
        "dtype": dtype,
        "m": m,
        "n": n,
        "k": k,
        "latency_s": 2 * m * n * k / (tflop_per_s * 1e12),
        "achieved_tflop_per_s": tflop_per_s,
    }


def h100_upload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "provenance": {
            "agent_version": "0.1.0",
            "method_version": 1,
            "host": "gpu-node-1",
            "device": "cuda:0",
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "gpu_uuid": "GPU-1234",
            "gpu_memory_bytes": 85_520_809_984,  # 81,559 MiB as NVML reports it
            "measured_at": "2026-11-29T10:00:00Z",
        },
        # 791.2 / 989 = 0.8 and 395.6 / 989 = 0.4 of the bf16 peak.
        "gemm": [
            gemm_row("bf16", 4096, 4096, 4096, 791.2),
            gemm_row("bf16", 64, 4096, 4096, 395.6),
        ],
        # 2.8475e12 / 3.35e12 = 0.85 of the HBM3 peak.
        "memory_bandwidth": [
            {
                "kind": "copy",
                "bytes_moved": 2 * 2**30,
                "latency_s": 2 * 2**30 / 2.8475e12,
                "achieved_bytes_per_s": 2.8475e12,
            }
        ],
        "kernel_launch_overhead_s": 4.5e-6,
    }
    payload.update(overrides)
    return payload


@pytest.fixture
def writer(create_key: Callable[..., str]) -> dict[str, str]:
    return bearer(create_key(Scope.PROFILES_WRITE))


@pytest.fixture
def admin(create_key: Callable[..., str]) -> dict[str, str]:
    return bearer(create_key(Scope.ADMIN, name="admin"))


def upload(
    client: TestClient, headers: dict[str, str], payload: dict[str, Any], key: str = "k-1"
) -> Any:
    return client.post(
        "/v1/hardware/h100-sxm/measurements",
        json=payload,
        headers={**headers, "Idempotency-Key": key},
    )


def test_every_reference_gpu_is_seeded(client: TestClient) -> None:
    page = client.get("/v1/hardware", params={"limit": 100}).json()
    assert page["total"] == len(datasheet_entries()) >= 16
    ids = {p["id"] for p in page["items"]}
    assert {"h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s", "b200", "mi300x"} <= ids


def test_pagination_and_filters(client: TestClient) -> None:
    first = client.get("/v1/hardware", params={"limit": 5}).json()
    assert len(first["items"]) == 5
    assert first["next_offset"] == 5
    total = len(datasheet_entries())
    last = client.get("/v1/hardware", params={"limit": 5, "offset": total - 5}).json()
    assert len(last["items"]) == 5
    assert last["next_offset"] is None
    amd = client.get("/v1/hardware", params={"vendor": "amd"}).json()
    assert {p["id"] for p in amd["items"]} == {"mi300x", "mi325x", "mi355x"}
    bad = client.get("/v1/hardware", params={"limit": 0})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["location"] == "query"


def test_datasheet_units_are_explicit(client: TestClient) -> None:
    h100 = client.get("/v1/hardware/h100-sxm")
    assert h100.status_code == 200
    assert h100.headers["etag"] == '"h100-sxm-v1"'
    body = h100.json()
    assert body["memory_bytes"] == 80 * 2**30  # advertised "80 GB" of HBM is 80 GiB
    assert body["memory_bandwidth_bytes_per_s"] == 3_350_000_000_000  # 3.35 TB/s, decimal
    assert body["peak_tflop_per_s"]["bf16"] == 989
    assert body["interconnect"] == {
        "kind": "nvlink",
        "bandwidth_bytes_per_s": 450_000_000_000,  # 900 GB/s bidirectional, per direction
        "gpus_per_node": 8,
    }
    assert body["efficiencies"]["gemm_source"] == "datasheet-default"
    assert body["efficiencies"]["memory_bandwidth"]["source"] == "datasheet-default"
    assert body["latest_measurement"] is None


def test_unknown_profile_is_404(client: TestClient) -> None:
    assert client.get("/v1/hardware/h999").status_code == 404


def test_upload_is_stored_and_shapes_the_efficiencies(
    client: TestClient, writer: dict[str, str]
) -> None:
    response = upload(client, writer, h100_upload())
    assert response.status_code == 201, response.text
    measurement_id = response.json()["id"]
    assert response.headers["location"].endswith(f"/measurements/{measurement_id}")

    body = client.get("/v1/hardware/h100-sxm").json()
    assert body["measurement_count"] == 1
    assert body["latest_measurement"]["gpu_uuid"] == "GPU-1234"
    eff = body["efficiencies"]
    assert eff["gemm_source"] == f"measurement:{measurement_id}"
    curve = {p["m"]: p["median_efficiency"] for p in eff["gemm"]["bf16"]}
    assert curve == {64: pytest.approx(0.4), 4096: pytest.approx(0.8)}
    assert eff["memory_bandwidth"]["value"] == pytest.approx(0.85)
    assert eff["memory_bandwidth"]["source"] == f"measurement:{measurement_id}"
    assert eff["kernel_launch_overhead_s"]["value"] == pytest.approx(4.5e-6)


def test_replay_returns_the_original_and_stores_nothing(
    client: TestClient, writer: dict[str, str]
) -> None:
    first = upload(client, writer, h100_upload())
    replay = upload(client, writer, h100_upload())
    assert replay.status_code == 201
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == first.json()
    history = client.get("/v1/hardware/h100-sxm/measurements").json()
    assert history["total"] == 1


def test_same_key_different_body_is_rejected(client: TestClient, writer: dict[str, str]) -> None:
    upload(client, writer, h100_upload())
    changed = upload(client, writer, h100_upload(kernel_launch_overhead_s=5e-6))
    assert changed.status_code == 422
    assert changed.json()["type"].endswith("idempotency-key-reused")
    assert client.get("/v1/hardware/h100-sxm/measurements").json()["total"] == 1


def test_idempotency_key_is_required(client: TestClient, writer: dict[str, str]) -> None:
    response = client.post("/v1/hardware/h100-sxm/measurements", json=h100_upload(), headers=writer)
    assert response.status_code == 400


def test_upload_needs_the_right_scope(client: TestClient, create_key: Callable[..., str]) -> None:
    assert upload(client, {}, h100_upload()).status_code == 401
    models_only = bearer(create_key(Scope.MODELS_WRITE))
    assert upload(client, models_only, h100_upload()).status_code == 403


@pytest.mark.parametrize(
    ("overrides", "pointer"),
    [
        # 1,200 TFLOP/s > 1.15 × 989 = 1,137.35: no H100 does that in bf16.
        ({"gemm": [gemm_row("bf16", 8192, 8192, 8192, 1200.0)]}, "/gemm/0/achieved_tflop_per_s"),
        # 4.0e12 B/s > 1.15 × 3.35e12 = 3.8525e12.
        (
            {
                "memory_bandwidth": [
                    {
                        "kind": "copy",
                        "bytes_moved": 2**30,
                        "latency_s": 2**30 / 4e12,
                        "achieved_bytes_per_s": 4e12,
                    }
                ]
            },
            "/memory_bandwidth/0/achieved_bytes_per_s",
        ),
        # NVLink 4: 450 GB/s per direction; 600 GB/s bus bandwidth > 1.15 × 450.
        (
            {
                "collectives": [
                    {
                        "op": "all_reduce",
                        "num_gpus": 8,
                        "message_bytes": 2**30,
                        "latency_s": 0.005,
                        "bus_bandwidth_bytes_per_s": 6e11,
                    }
                ]
            },
            "/collectives/0/bus_bandwidth_bytes_per_s",
        ),
        ({"gemm": [gemm_row("fp4", 4096, 4096, 4096, 100.0)]}, "/gemm/0/dtype"),
    ],
)
def test_impossible_values_are_422_and_nothing_is_stored(
    client: TestClient, writer: dict[str, str], overrides: dict[str, Any], pointer: str
) -> None:
    response = upload(client, writer, h100_upload(**overrides))
    assert response.status_code == 422, response.text
    assert pointer in {e["pointer"] for e in response.json()["errors"]}
    assert client.get("/v1/hardware/h100-sxm/measurements").json()["total"] == 0


def test_inconsistent_gemm_row_fails_validation(client: TestClient, writer: dict[str, str]) -> None:
    row = gemm_row("bf16", 4096, 4096, 4096, 500.0) | {"achieved_tflop_per_s": 700.0}
    response = upload(client, writer, h100_upload(gemm=[row]))
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/gemm/0"


@pytest.mark.parametrize(
    ("gpu_name", "memory_bytes", "pointer"),
    [
        ("NVIDIA A100-SXM4-80GB", 85_520_809_984, "/provenance/gpu_name"),
        ("NVIDIA H100 PCIe", 85_520_809_984, "/provenance/gpu_name"),
        ("NVIDIA H100 80GB HBM3", 42_949_672_960, "/provenance/gpu_memory_bytes"),
    ],
)
def test_upload_from_another_device_is_rejected(
    client: TestClient, writer: dict[str, str], gpu_name: str, memory_bytes: int, pointer: str
) -> None:
    payload = h100_upload()
    payload["provenance"] |= {"gpu_name": gpu_name, "gpu_memory_bytes": memory_bytes}
    response = upload(client, writer, payload)
    assert response.status_code == 422
    assert [e["pointer"] for e in response.json()["errors"]] == [pointer]


def test_custom_profile_lifecycle_with_etags(client: TestClient, admin: dict[str, str]) -> None:
    profile = {
        "id": "cpu-host",
        "vendor": "Generic",
        "name": "CPU host",
        "memory_bytes": 64 * 2**30,
        "memory_bandwidth_bytes_per_s": 50_000_000_000,
        "peak_tflop_per_s": {"fp32": 2.0},
        "identity_tokens": [],
    }
    created = client.post("/v1/hardware", json=profile, headers=admin)
    assert created.status_code == 201, created.text
    etag = created.headers["etag"]
    assert client.post("/v1/hardware", json=profile, headers=admin).status_code == 409

    no_precondition = client.patch("/v1/hardware/cpu-host", json={"notes": "x"}, headers=admin)
    assert no_precondition.status_code == 428
    stale = client.patch(
        "/v1/hardware/cpu-host", json={"notes": "x"}, headers={**admin, "If-Match": '"cpu-host-v9"'}
    )
    assert stale.status_code == 412
    patched = client.patch(
        "/v1/hardware/cpu-host", json={"notes": "lab"}, headers={**admin, "If-Match": etag}
    )
    assert patched.status_code == 200
    assert patched.json()["notes"] == "lab"
    assert patched.headers["etag"] != etag
    # The old ETag no longer works: a second editor cannot overwrite the first.
    again = client.patch(
        "/v1/hardware/cpu-host", json={"notes": "other"}, headers={**admin, "If-Match": etag}
    )
    assert again.status_code == 412

    deleted = client.delete(
        "/v1/hardware/cpu-host", headers={**admin, "If-Match": patched.headers["etag"]}
    )
    assert deleted.status_code == 204
    assert client.get("/v1/hardware/cpu-host").status_code == 404


def test_datasheet_profiles_take_prices_but_not_new_figures(
    client: TestClient, admin: dict[str, str]
) -> None:
    etag = client.get("/v1/hardware/h100-sxm").headers["etag"]
    price = {"per_gpu_hour": 2.49, "currency": "USD", "as_of": "2026-11-01", "source": "quote"}
    priced = client.patch(
        "/v1/hardware/h100-sxm", json={"price": price}, headers={**admin, "If-Match": etag}
    )
    assert priced.status_code == 200
    assert priced.json()["price"]["per_gpu_hour"] == 2.49
    refused = client.patch(
        "/v1/hardware/h100-sxm",
        json={"memory_bytes": 1},
        headers={**admin, "If-Match": priced.headers["etag"]},
    )
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["pointer"] == "/memory_bytes"
    assert client.delete("/v1/hardware/h100-sxm", headers=admin).status_code == 409


def test_profile_with_measurements_cannot_be_deleted(
    client: TestClient, admin: dict[str, str], writer: dict[str, str]
) -> None:
    profile = {
        "id": "h100-lab",
        "vendor": "NVIDIA",
        "name": "H100 SXM lab",
        "memory_bytes": 80 * 2**30,
        "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
        "peak_tflop_per_s": {"bf16": 989.0},
        "identity_tokens": ["H100", "SXM"],
    }
    etag = client.post("/v1/hardware", json=profile, headers=admin).headers["etag"]
    stored = client.post(
        "/v1/hardware/h100-lab/measurements",
        json=h100_upload(),
        headers={**writer, "Idempotency-Key": "lab-1"},
    )
    assert stored.status_code == 201, stored.text
    refused = client.delete("/v1/hardware/h100-lab", headers={**admin, "If-Match": etag})
    assert refused.status_code == 409
    one = client.get(f"/v1/hardware/h100-lab/measurements/{stored.json()['id']}").json()
    assert one["payload"]["provenance"]["gpu_uuid"] == "GPU-1234"
