"""Process configuration, read once at the entry points (app factory, CLI, migrations)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class Settings(BaseSettings):
    """Environment variables (case-insensitive: ``DATABASE_URL`` sets ``database_url``) or ``.env``.

    Relative paths resolve against the working directory.
    """

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    database_url: str = "sqlite:///servesize.db"
    """SQLAlchemy URL: SQLite by default, ``postgresql+psycopg://user:pw@host/db`` in production."""

    models_dir: Path = Path(str(files("servesize") / "data" / "models"))
    """Directory of the model catalogue: one upstream ``config.json`` per ``{org}--{name}.json``."""

    log_level: LogLevel = "INFO"
    """Minimum level of the JSON log lines written to standard error."""

    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest request body accepted; larger bodies get 413 (default 1 MiB)."""

    read_requires_key: bool = False
    """When true, GET endpoints under /v1 also need a valid API key (any scope)."""

    rate_limit_per_minute: int = Field(default=1200, ge=0)
    """Requests per minute allowed per authenticated API key, else per client address (a key
    that does not verify counts against the address); 0 = off."""

    auth_failures_per_minute: int = Field(default=10, ge=0)
    """Failed authentications per minute allowed per client address; after that, requests from
    the address that present a key get 429 until the window ends (before any key lookup);
    0 = off."""

    trusted_proxies: Annotated[tuple[str, ...], NoDecode] = ()
    """Proxies whose ``X-Forwarded-For`` is believed: comma-separated addresses or CIDR networks
    (``TRUSTED_PROXIES=10.0.0.0/8,127.0.0.1``). Empty (the default): the TCP peer is the client."""

    compute_workers: int = Field(default=4, ge=1, le=256)
    """Estimates (``/v1/memory``, ``/v1/kv-budget``, ``/v1/performance``, ``/v1/queueing``)
    computed at once, each on a worker thread; more wait in a queue."""

    compute_queue: int = Field(default=256, ge=0)
    """Estimates that may wait for a worker; beyond it a request gets 503 with Retry-After."""

    heavy_workers: int = Field(default=2, ge=1, le=64)
    """Simulations, SLO checks and sizings (``/v1/simulate``, ``/v1/slo/*``, ``/v1/sizing``)
    computed at once."""

    heavy_queue: int = Field(default=32, ge=0)
    """Simulations, SLO checks and sizings that may wait; beyond it 503 with Retry-After."""

    compute_deadline_s: float = Field(default=120.0, gt=0)
    """Longest a computation may take, queueing included; past it the work is interrupted and
    the request gets 503 ``deadline-exceeded``."""

    job_workers: int | None = Field(default=None, ge=1, le=256)
    """Processes of the embedded job pool (``POST /v1/jobs``); unset: ``os.cpu_count()``."""

    sync_pool: bool = True
    """Synchronous sizings (``POST /v1/sizing``) screen and simulate on the embedded job pool
    (all cores, shared with the jobs); false, or with ``BROKER_URL`` set: in the request's
    worker thread."""

    workers: int = Field(default=1, ge=1, le=64)
    """API processes ``servesize serve`` starts (uvicorn workers on one socket). Above 1, rate
    limits, the sizing answer cache and job state are shared through the state store, and
    ``/metrics`` sums every process (prometheus_client multiprocess mode)."""

    state_store: Literal["memory", "database", "redis"] | None = None
    """Where rate-limit counters and cached sizing answers live. Unset: ``redis`` when
    ``REDIS_URL`` is set, else ``database`` when ``WORKERS`` > 1, else ``memory`` (this process
    only). Set ``database`` when several separate ``servesize serve`` share one database."""

    redis_url: str | None = None
    """``redis://host:6379/0``: the shared state store (rate limits, sizing answers)."""

    redis_key_prefix: str = Field(default="servesize:", min_length=1, max_length=64)
    """Prefix of every Redis key the service writes (several services may share a Redis)."""

    sizing_cache_ttl_s: float = Field(default=3600.0, gt=0)
    """How long a shared sizing answer is served from the state store."""

    job_lease_s: float = Field(default=30.0, ge=1)
    """A running job's lease: its process renews it every third of this; a job whose lease
    lapsed (its process stopped) is failed as interrupted."""
    broker_url: str | None = None
    """Celery broker for jobs (``amqp://guest:guest@127.0.0.1:5672//`` or
    ``redis://127.0.0.1:6379/0``): jobs then run on ``servesize worker`` processes, a sweep's
    combinations as tasks of their own. Unset: the embedded process pool."""

    result_backend: str | None = None
    """Where workers store task results; unset: the broker URL for Redis, ``rpc://`` (replies
    over the broker) for AMQP."""

    job_queue: str = Field(default="servesize", min_length=1, max_length=200)
    """The broker queue jobs are sent to and ``servesize worker`` consumes."""

    job_soft_time_limit_s: float = Field(default=900.0, gt=0)
    """A task past this is interrupted and its combination or job fails with ``time-limit``."""

    job_time_limit_s: float = Field(default=960.0, gt=0)
    """A task past this has its worker process killed (the job fails with the worker's loss)."""

    lookup_cache_ttl_s: float = Field(default=2.0, ge=0)
    """How long a cached hardware profile or custom model is used before it is checked against
    the database again (writes through this process invalidate at once; this bounds how long a
    write by another process goes unseen)."""

    db_pool_size: int = Field(default=5, ge=1)
    """Database connections kept open (SQLAlchemy ``pool_size``)."""

    db_max_overflow: int = Field(default=10, ge=0)
    """Connections opened beyond ``db_pool_size`` under load and closed after use."""

    db_pool_timeout_s: float = Field(default=10.0, gt=0)
    """Longest wait for a database connection from the pool; past it the request gets 503."""

    secret_key: SecretStr | None = Field(default=None, repr=False)
    """Secret for the keyed hash of API keys. Unset: a random secret stored in the database
    at migration time is used, so API keys survive restarts with no configuration."""

    def shared_store(self) -> Literal["memory", "database", "redis"]:
        """The state store in effect (see ``state_store``)."""
        if self.state_store is not None:
            return self.state_store
        if self.redis_url:
            return "redis"
        return "database" if self.workers > 1 else "memory"

    @model_validator(mode="after")
    def _redis_needs_url(self) -> Settings:
        if self.state_store == "redis" and not self.redis_url:
            raise ValueError("STATE_STORE=redis needs REDIS_URL")
        return self

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        """Accept a comma-separated string; each entry must parse as an address or network
        (a bare address is a /32 or /128)."""
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            return value
        networks: list[str] = []
        for item in items:
            text = str(item).strip()
            if not text:
                continue
            try:
                networks.append(str(ipaddress.ip_network(text, strict=False)))
            except ValueError:
                raise ValueError(f"{text!r} is not an IP address or CIDR network") from None
        return tuple(networks)

    @field_validator("database_url")
    @classmethod
    def _normalise_postgres_scheme(cls, url: str) -> str:
        """Accept the ``postgres://`` and ``postgresql://`` spellings; we speak psycopg 3."""
        for prefix in ("postgres://", "postgresql://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once; only entry points call this."""
    return Settings()
