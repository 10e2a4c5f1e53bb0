"""/v1/performance compiles a deployment once and compiles anew after the profile changes.

The reference for "the same answer" is the first answer; for "a changed profile is used" a
memory-bound decode step that must get faster when the profile's HBM bandwidth doubles.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from servesize.api.replica_resolver import REPLICAS
from servesize.security import Scope

BANDWIDTH_BYTES_PER_S = 2_000_000_000_000
PROFILE: dict[str, object] = {
    "id": "lab-gpu",
    "vendor": "Lab",
    "name": "Lab GPU",
    "memory_bytes": 80 * 2**30,
    "memory_bandwidth_bytes_per_s": BANDWIDTH_BYTES_PER_S,
    "peak_tflop_per_s": {"bf16": 800.0},
    "identity_tokens": [],
}
BODY = {
    "model": "meta-llama/Llama-3.1-8B",
    "hardware": "lab-gpu",
    "workload": {"concurrency": 4, "input_tokens": 512, "output_tokens": 64},
}


def test_a_repeated_request_reuses_the_replica_until_the_profile_changes(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    client = make_client(lookup_cache_ttl_s=3600)
    admin = {"Authorization": f"Bearer {create_key(Scope.ADMIN, name='admin')}"}
    created = client.post("/v1/hardware", json=PROFILE, headers=admin)
    assert created.status_code == 201, created.text
    first = client.post("/v1/performance", json=BODY)
    assert first.status_code == 200, first.text
    hits, misses = REPLICAS.hits, REPLICAS.misses
    again = client.post("/v1/performance", json=BODY)
    assert again.json() == first.json()
    assert (REPLICAS.hits, REPLICAS.misses) == (hits + 1, misses)

    faster = {"memory_bandwidth_bytes_per_s": 2 * BANDWIDTH_BYTES_PER_S}
    patched = client.patch(
        "/v1/hardware/lab-gpu", json=faster, headers={**admin, "If-Match": created.headers["etag"]}
    )
    assert patched.status_code == 200, patched.text
    after = client.post("/v1/performance", json=BODY)
    assert after.status_code == 200, after.text
    assert REPLICAS.misses == misses + 1
    # Four sequences decoding an 8B model are memory-bound: twice the bandwidth, a faster step.
    assert after.json()["decode_step_time_s"] < first.json()["decode_step_time_s"]
