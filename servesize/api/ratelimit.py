"""Rate limits: fixed-window counters per client, the client's address, and the draft headers.

Who is counted (:class:`RateLimits`):

- a request whose key authenticated counts against that key (``key:<key_id>``);
- any other request counts against the peer address (``addr:<ip>``) — a request presenting a
  key that does not verify included, so a forged or wrong-secret key can neither skip the
  per-address limit nor spend the quota of the key id it names;
- every failed authentication also counts against the address's failure budget; once that is
  spent, requests from the address that present a key are refused (429) before any key lookup.

The address is the TCP peer, or, when the peer is a configured proxy (``TRUSTED_PROXIES``), the
right-most ``X-Forwarded-For`` entry that is not itself a trusted proxy.

Responses carry the ``RateLimit-Policy`` and ``RateLimit`` fields of
draft-ietf-httpapi-ratelimit-headers-10 (structured-field lists: a policy is
``"name";q=<quota>;w=<window_s>``, the state ``"name";r=<remaining>;t=<seconds to reset>``).
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import Scope

from servesize.api.shared_state import CounterStore

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DRAFT = "draft-ietf-httpapi-ratelimit-headers-10"
REQUESTS_POLICY = "requests"
AUTH_FAILURES_POLICY = "auth-failures"
STATE_KEY = "ratelimit"
"""``scope["state"]`` entry holding the :class:`RateDecision` a response reports."""
DEFERRED_KEY = "ratelimit_deferred"
"""``scope["state"]`` entry: the request presents a key, so authentication does the counting."""
ADDRESS_KEY = "client_address"


@dataclass(frozen=True, slots=True)
class RateDecision:
    """One counted request: allowed or not, and the state the response reports."""

    policy: str
    allowed: bool
    limit: int
    remaining: int
    reset_s: int
    """Whole seconds until the window restarts (at least 1)."""

    def header(self) -> str:
        """The ``RateLimit`` field value."""
        return f'"{self.policy}";r={self.remaining};t={self.reset_s}'


class RateLimiter:
    """Allow ``limit`` requests per client per ``window_s``; report the wait when over.

    Fixed windows keep the state to one counter per client; a burst of up to ``2 * limit``
    across a window boundary is accepted as the price of that simplicity.
    """

    def __init__(
        self,
        limit: int,
        *,
        window_s: float = 60.0,
        policy: str = REQUESTS_POLICY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self.window_s = window_s
        self.policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start = clock()
        self._counts: dict[str, int] = {}

    def _roll(self) -> float:
        now = self._clock()
        if now - self._window_start >= self.window_s:
            self._window_start = now
            self._counts.clear()
        return now

    def _decision(self, count: int, now: float, *, allowed: bool) -> RateDecision:
        return RateDecision(
            policy=self.policy,
            allowed=allowed,
            limit=self.limit,
            remaining=max(0, self.limit - count),
            reset_s=max(1, math.ceil(self._window_start + self.window_s - now)),
        )

    def hit(self, client: str) -> RateDecision:
        """Count one request of ``client``."""
        with self._lock:
            now = self._roll()
            count = self._counts.get(client, 0) + 1
            self._counts[client] = count
            return self._decision(count, now, allowed=count <= self.limit)

    def peek(self, client: str) -> RateDecision:
        """The state without counting: ``allowed`` is false once the budget is spent."""
        with self._lock:
            now = self._roll()
            count = self._counts.get(client, 0)
            return self._decision(count, now, allowed=count < self.limit)

    def policy_header(self) -> str:
        return f'"{self.policy}";q={self.limit};w={math.ceil(self.window_s)}'


class SharedRateLimiter(RateLimiter):
    """:class:`RateLimiter` whose counters live in a shared store (``STATE_STORE``), so every
    API process counts against the same budget.

    Windows are aligned to the wall clock (window ``n`` covers ``[n * window_s, (n+1) *
    window_s)`` in Unix time), so every process agrees on them without talking; the counter key
    is ``<policy>:<client>:<n>`` and expires with its window.
    """

    def __init__(
        self,
        limit: int,
        store: CounterStore,
        *,
        window_s: float = 60.0,
        policy: str = REQUESTS_POLICY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(limit, window_s=window_s, policy=policy, clock=clock)
        self.store = store

    def _window(self, client: str) -> tuple[str, float, float]:
        """The counter key, the window's end (Unix time) and now."""
        now = self._clock()
        index = math.floor(now / self.window_s)
        return f"{self.policy}:{client}:{index}", (index + 1) * self.window_s, now

    def _shared_decision(
        self, count: int, end_s: float, now: float, *, allowed: bool
    ) -> RateDecision:
        return RateDecision(
            policy=self.policy,
            allowed=allowed,
            limit=self.limit,
            remaining=max(0, self.limit - count),
            reset_s=max(1, math.ceil(end_s - now)),
        )

    def hit(self, client: str) -> RateDecision:
        key, end_s, now = self._window(client)
        count = self.store.incr(key, end_s)
        return self._shared_decision(count, end_s, now, allowed=count <= self.limit)

    def peek(self, client: str) -> RateDecision:
        key, end_s, now = self._window(client)
        count = self.store.get(key)
        return self._shared_decision(count, end_s, now, allowed=count < self.limit)


def parse_networks(value: str | Sequence[str]) -> tuple[Network, ...]:
    """``"10.0.0.0/8, 127.0.0.1"`` (or a list of such) as networks; a bare address is a /32
    (/128). ``ValueError`` names the entry that is not one."""
    items = value.split(",") if isinstance(value, str) else list(value)
    networks: list[Network] = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address or CIDR network") from None
    return tuple(networks)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(text: str, proxies: Sequence[Network]) -> bool:
    address = _ip(text)
    return address is not None and any(address in net for net in proxies)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name]
    return ",".join(values) if values else None


def client_address(scope: Scope, trusted_proxies: Sequence[Network]) -> str:
    """The address a request is counted under.

    The TCP peer, unless it is a trusted proxy: then ``X-Forwarded-For`` is read from the right
    (each proxy appends the address it received from) and the first entry that is not a trusted
    proxy is the client. Entries left of it were written by the client and are never believed.
    """
    client = scope.get("client")
    peer = str(client[0]) if client else "unknown"
    if not trusted_proxies or not _trusted(peer, trusted_proxies):
        return peer
    forwarded = _header(scope, b"x-forwarded-for")
    if not forwarded:
        return peer
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, trusted_proxies):
            address = _ip(hop)
            return str(address) if address is not None else hop[:64]
    return hops[0] if hops else peer


class RateLimits:
    """The request limit, the failed-authentication limit and the trusted proxies of one app."""

    def __init__(
        self,
        *,
        requests: RateLimiter | None,
        auth_failures: RateLimiter | None,
        trusted_proxies: Sequence[Network] = (),
    ) -> None:
        self.requests = requests
        self.auth_failures = auth_failures
        self.trusted_proxies = tuple(trusted_proxies)
        self.shared = any(isinstance(lim, SharedRateLimiter) for lim in (requests, auth_failures))
        """Counting is a round trip to a shared store (done off the event loop)."""

    def policy_header(self) -> str | None:
        """The ``RateLimit-Policy`` field value, ``None`` when no limit is on."""
        parts = [lim.policy_header() for lim in (self.requests, self.auth_failures) if lim]
        return ", ".join(parts) or None

    def address(self, scope: Scope) -> str:
        return client_address(scope, self.trusted_proxies)

    def count_address(self, address: str) -> RateDecision | None:
        return self.requests.hit("addr:" + address) if self.requests else None

    def count_key(self, key_id: str) -> RateDecision | None:
        return self.requests.hit("key:" + key_id) if self.requests else None

    def failures_spent(self, address: str) -> RateDecision | None:
        """The failure budget's state when it is spent (refuse the request), else ``None``."""
        if self.auth_failures is None:
            return None
        state = self.auth_failures.peek("addr:" + address)
        return None if state.allowed else state

    def record_failure(self, address: str) -> RateDecision | None:
        return self.auth_failures.hit("addr:" + address) if self.auth_failures else None

    def settle(self, state: dict[str, Any], key_id: str | None) -> RateDecision | None:
        """Count a request that presented a key, once authentication has judged it: against
        ``key_id`` when the key verified, else against the address (and its failure budget).
        Returns the refusal when the request is over its limit, else ``None``. A request the
        middleware did not defer (not under ``/v1``, or counted already) is left alone."""
        if not state.get(DEFERRED_KEY):
            return None
        state[DEFERRED_KEY] = False
        address = str(state.get(ADDRESS_KEY, "unknown"))
        if key_id is not None:
            decision = self.count_key(key_id)
        else:
            self.record_failure(address)
            decision = self.count_address(address)
        if decision is None:
            return None
        state[STATE_KEY] = decision
        return None if decision.allowed else decision
