"""The rate limiter counts verified keys, else peer addresses, and cannot be turned on a key's
owner; failed authentications are limited per address; the draft RateLimit fields are sent."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from servesize.api.app import create_app
from servesize.api.ratelimit import client_address, parse_networks
from servesize.security import Scope
from servesize.settings import Settings


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def two_clients(database_url: str) -> Iterator[Callable[..., tuple[TestClient, TestClient]]]:
    """One app seen from two addresses: an attacker's and a victim's."""
    opened: list[TestClient] = []

    def build(**overrides: object) -> tuple[TestClient, TestClient]:
        fields: dict[str, object] = {"database_url": database_url, **overrides}
        app = create_app(Settings.model_validate(fields))
        pair = (
            TestClient(app, client=("198.51.100.7", 40000)),
            TestClient(app, client=("203.0.113.9", 40001)),
        )
        for c in pair:
            c.__enter__()
            opened.append(c)
        return pair

    yield build
    for c in opened:
        c.__exit__(None, None, None)


def test_forged_keys_do_not_skip_the_address_limit(make_client: Callable[..., TestClient]) -> None:
    """30 requests from an address that is over its limit, each with a made-up key, are all
    429: an unverified key id is no identity of its own."""
    client = make_client(rate_limit_per_minute=3, auth_failures_per_minute=0)
    assert [client.get("/v1/models").status_code for _ in range(3)] == [200, 200, 200]
    assert client.get("/v1/models").status_code == 429
    statuses = {
        client.get("/v1/models", headers=bearer(f"ssk_{secrets.token_hex(8)}_x")).status_code
        for _ in range(30)
    }
    assert statuses == {429}


def test_wrong_secrets_under_a_victims_key_id_do_not_limit_the_victim(
    two_clients: Callable[..., tuple[TestClient, TestClient]], create_key: Callable[..., str]
) -> None:
    attacker, victim = two_clients(rate_limit_per_minute=5)
    key = create_key(Scope.MODELS_WRITE)
    forged = key.rsplit("_", 1)[0] + "_" + "A" * 43  # the victim's public id, a wrong secret
    statuses = [attacker.get("/v1/models", headers=bearer(forged)).status_code for _ in range(20)]
    assert set(statuses) <= {401, 429}
    assert statuses[-1] == 429
    # The victim's key has spent nothing: 5 of 5 remain.
    for remaining in (4, 3, 2, 1, 0):
        response = victim.get("/v1/models", headers=bearer(key))
        assert response.status_code == 200
        assert response.headers["ratelimit"].startswith(f'"requests";r={remaining};')


def test_verified_key_is_counted_by_key_not_by_address(
    make_client: Callable[..., TestClient], create_key: Callable[..., str]
) -> None:
    """An address over its anonymous limit still serves a verified key (its own budget)."""
    client = make_client(rate_limit_per_minute=2)
    key = create_key(Scope.MODELS_WRITE)
    assert [client.get("/v1/models").status_code for _ in range(3)] == [200, 200, 429]
    assert [client.get("/v1/models", headers=bearer(key)).status_code for _ in range(3)] == [
        200,
        200,
        429,
    ]


def test_failed_authentications_are_limited_per_address(
    two_clients: Callable[..., tuple[TestClient, TestClient]], create_key: Callable[..., str]
) -> None:
    attacker, other = two_clients(rate_limit_per_minute=0, auth_failures_per_minute=3)
    key = create_key(Scope.ADMIN)
    wrong = bearer(f"ssk_{secrets.token_hex(8)}_guess")
    assert [attacker.get("/v1/keys", headers=wrong).status_code for _ in range(3)] == [401] * 3
    refused = attacker.get("/v1/keys", headers=wrong)
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["policy"] == "auth-failures"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.headers["ratelimit"].startswith('"auth-failures";r=0;')
    # The limited address is refused before any lookup, even with a good key...
    assert attacker.get("/v1/keys", headers=bearer(key)).status_code == 429
    # ...but can still read without a key, and another address is untouched.
    assert attacker.get("/v1/models").status_code == 200
    assert other.get("/v1/keys", headers=bearer(key)).status_code == 200


def test_ratelimit_fields_follow_the_draft(make_client: Callable[..., TestClient]) -> None:
    """draft-ietf-httpapi-ratelimit-headers-10: policy ``"name";q=<quota>;w=<window>``,
    state ``"name";r=<remaining>;t=<reset seconds>``."""
    client = make_client(rate_limit_per_minute=2, auth_failures_per_minute=7)
    first = client.get("/v1/models")
    assert first.headers["ratelimit-policy"] == '"requests";q=2;w=60, "auth-failures";q=7;w=60'
    match = re.fullmatch(r'"requests";r=1;t=(\d+)', first.headers["ratelimit"])
    assert match is not None
    assert 1 <= int(match.group(1)) <= 60
    assert client.get("/v1/models").headers["ratelimit"].startswith('"requests";r=0;')
    limited = client.get("/v1/models")
    assert limited.status_code == 429
    assert limited.headers["ratelimit"].startswith('"requests";r=0;')
    assert "ratelimit" not in client.get("/livez").headers  # probes are not counted


def test_forwarded_for_is_ignored_without_trusted_proxies(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(rate_limit_per_minute=3)
    statuses = [
        client.get("/v1/models", headers={"X-Forwarded-For": f"192.0.2.{i}"}).status_code
        for i in range(4)
    ]
    assert statuses == [200, 200, 200, 429]


def test_forwarded_for_from_a_trusted_proxy_names_the_client(database_url: str) -> None:
    app = create_app(
        Settings(
            database_url=database_url, rate_limit_per_minute=2, trusted_proxies=("10.0.0.0/8",)
        )
    )
    with TestClient(app, client=("10.1.2.3", 5000)) as proxy:
        # Each client behind the proxy has its own budget; a client-written entry on the left
        # is not believed (the proxy appended the address it saw).
        for _ in range(2):
            ok = proxy.get("/v1/models", headers={"X-Forwarded-For": "6.6.6.6, 192.0.2.10"})
            assert ok.status_code == 200
        spoofed = proxy.get("/v1/models", headers={"X-Forwarded-For": "7.7.7.7, 192.0.2.10"})
        assert spoofed.status_code == 429
        assert proxy.get("/v1/models", headers={"X-Forwarded-For": "192.0.2.11"}).status_code == 200


def test_client_address_reads_forwarded_for_right_to_left() -> None:
    proxies = parse_networks("10.0.0.0/8, 2001:db8::/32")

    def scope(peer: str, forwarded: str | None) -> dict[str, object]:
        headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
        return {"client": (peer, 1), "headers": headers}

    assert client_address(scope("192.0.2.1", "10.0.0.1"), proxies) == "192.0.2.1"  # untrusted peer
    assert client_address(scope("10.0.0.2", "1.2.3.4, 192.0.2.5, 10.0.0.9"), proxies) == (
        "192.0.2.5"
    )
    assert client_address(scope("2001:db8::1", "2001:0db8:0:0::7, 192.0.2.6"), proxies) == (
        "192.0.2.6"
    )
    assert client_address(scope("10.0.0.2", None), proxies) == "10.0.0.2"
    assert client_address(scope("10.0.0.2", "10.0.0.3"), proxies) == "10.0.0.3"  # all proxies
    assert client_address(scope("10.0.0.2", "1.2.3.4"), ()) == "10.0.0.2"  # none trusted


def test_trusted_proxies_setting_is_validated() -> None:
    assert Settings(trusted_proxies="10.0.0.0/8, 127.0.0.1").trusted_proxies == (
        "10.0.0.0/8",
        "127.0.0.1/32",
    )
    with pytest.raises(ValueError, match="not an IP address"):
        Settings(trusted_proxies="example.com")
