"""Send a measurement to a servesize server, safely retried.

``POST {url}/v1/hardware/{profile}/measurements`` with ``Authorization: Bearer <key>`` and an
``Idempotency-Key`` chosen once per payload: a replay with the same key stores nothing new, so
every retry (and a later ``servesize-agent upload FILE``) reuses it. The server answers 201
with ``{"id": ...}`` (a replay: 200, or 201 with ``Idempotent-Replayed: true``); errors are
RFC 9457 ``application/problem+json``.

Retries: connection errors, 5xx and 429, with exponential backoff (``Retry-After`` honoured),
bounded in attempts and in total time. Other 4xx answers are final.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
from pydantic import BaseModel, ConfigDict, Field

from servesize import __version__
from servesize.schemas.measurements import MeasurementUpload


class SavedMeasurement(BaseModel):
    """The ``--out`` file: the payload plus what is needed to send it later, unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    idempotency_key: str = Field(min_length=1, max_length=255)
    profile: str | None = Field(default=None, description="Hardware profile id on the server.")
    payload: MeasurementUpload

    @classmethod
    def new(cls, payload: MeasurementUpload, *, profile: str | None) -> SavedMeasurement:
        return cls(idempotency_key=str(uuid.uuid4()), profile=profile, payload=payload)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> SavedMeasurement:
        return cls.model_validate_json(path.read_bytes())


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Backoff before attempt ``i`` (i ≥ 2): ``min(max_delay_s, base_delay_s·2^(i−2))`` times a
    random factor in [0.5, 1], or the server's ``Retry-After`` when it sends one."""

    max_attempts: int = 6
    max_total_s: float = 120.0
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    request_timeout_s: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadResult:
    """``replayed``: the server already had this idempotency key (a 200, or an
    ``Idempotent-Replayed: true`` header) and stored nothing new."""

    status_code: int
    measurement_id: str | None
    attempts: int
    replayed: bool


class UploadError(Exception):
    """The server refused the upload, or retries ran out; ``detail`` is the problem's text."""

    def __init__(
        self,
        detail: str,
        *,
        status_code: int | None = None,
        errors: list[str] | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status_code = status_code
        self.errors = errors or []
        self.attempts = attempts


def measurements_url(base_url: str, profile: str) -> str:
    return f"{base_url.rstrip('/')}/v1/hardware/{quote(profile, safe='')}/measurements"


def retry_after_s(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def problem_of(response: httpx2.Response) -> tuple[str, list[str]]:
    """``detail`` (or ``title``) and one line per ``errors[]`` entry of a problem document;
    the start of the body when the answer is not JSON."""
    try:
        body: Any = response.json()
    except ValueError:
        text = response.text.strip()[:300]
        return (text or f"HTTP {response.status_code}"), []
    if not isinstance(body, dict):
        return f"HTTP {response.status_code}", []
    detail = str(body.get("detail") or body.get("title") or f"HTTP {response.status_code}")
    lines = []
    for error in body.get("errors") or []:
        if isinstance(error, dict):
            where = error.get("pointer") or error.get("location") or ""
            lines.append(f"{where}: {error.get('detail', '')}".strip(": "))
        else:
            lines.append(str(error))
    return detail, lines


def _retryable(status_code: int) -> bool:
    return status_code == 429 or status_code >= 500


def upload(
    saved: SavedMeasurement,
    *,
    url: str,
    token: str,
    profile: str | None = None,
    policy: RetryPolicy = RetryPolicy(),
    client: httpx2.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, float, str], None] | None = None,
) -> UploadResult:
    """POST ``saved.payload``; retries keep ``saved.idempotency_key``. ``profile`` overrides the
    one in ``saved``. Raises :class:`UploadError` on a final refusal or when retries run out."""
    target = profile or saved.profile
    if not target:
        raise UploadError("no hardware profile: pass --profile (or save it in the file)")
    headers = {
        "Authorization": f"Bearer {token}",
        "Idempotency-Key": saved.idempotency_key,
        "User-Agent": f"servesize-agent/{__version__}",
    }
    body = saved.payload.model_dump(mode="json")
    endpoint = measurements_url(url, target)
    own_client = client is None
    http = client or httpx2.Client(timeout=policy.request_timeout_s)
    started = time.monotonic()
    try:
        attempt = 0
        while True:
            attempt += 1
            server_delay_s: float | None = None
            try:
                response = http.post(endpoint, json=body, headers=headers)
            except httpx2.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code in (200, 201):
                    try:
                        answer = response.json()
                    except ValueError:
                        answer = {}
                    measurement_id = answer.get("id") if isinstance(answer, dict) else None
                    replayed = response.status_code == 200 or (
                        response.headers.get("Idempotent-Replayed", "").lower() == "true"
                    )
                    return UploadResult(
                        status_code=response.status_code,
                        measurement_id=str(measurement_id) if measurement_id is not None else None,
                        attempts=attempt,
                        replayed=replayed,
                    )
                detail, errors = problem_of(response)
                if not _retryable(response.status_code):
                    raise UploadError(
                        detail, status_code=response.status_code, errors=errors, attempts=attempt
                    )
                reason = f"HTTP {response.status_code}: {detail}"
                server_delay_s = retry_after_s(response.headers.get("Retry-After"))
            backoff_s = min(policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1))
            delay_s = (
                server_delay_s if server_delay_s is not None else backoff_s * random.uniform(0.5, 1)
            )
            elapsed_s = time.monotonic() - started
            if attempt >= policy.max_attempts or elapsed_s + delay_s > policy.max_total_s:
                raise UploadError(
                    f"gave up after {attempt} attempts; last: {reason}", attempts=attempt
                )
            if on_retry is not None:
                on_retry(attempt, delay_s, reason)
            sleep(delay_s)
    finally:
        if own_client:
            http.close()
