"""ORM tables. Byte and token counts use BigInteger (80 GiB overflows a 32-bit INTEGER)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Date,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from servesize.core.hardware import HardwareSpec, Interconnect, InterNodeLink
from servesize.db.base import Base
from servesize.db.types import UTCDateTime, utc_now


class InstanceSecret(Base):
    """One row: the random secret that keys API-key hashes when no ``SECRET_KEY`` is set."""

    __tablename__ = "instance_secret"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    secret_hex: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class ApiKey(Base):
    """An API key: only a keyed hash of its secret part is stored."""

    __tablename__ = "api_key"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[str] = mapped_column(String(32), unique=True)
    """Public identifier, also the second field of the key string ``ssk_<key_id>_<secret>``."""
    name: Mapped[str] = mapped_column(String(200), unique=True)
    key_hash: Mapped[str] = mapped_column(String(128))
    """Hex HMAC-SHA256 of the secret part, keyed by the instance secret."""
    scopes: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    created_by: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None
    )
    """The admin key that created this one through the API; null when made by the CLI."""
    note: Mapped[str | None] = mapped_column(Text, default=None)

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class CustomModel(Base):
    """A model architecture registered through the API (the catalogue lives in ``models/``)."""

    __tablename__ = "custom_model"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[str] = mapped_column(String(200), unique=True)
    """Hugging Face style id, ``org/name``."""
    config: Mapped[dict[str, object]] = mapped_column(JSON)
    """The ``config.json`` as registered, verbatim."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    created_by: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None
    )
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None
    )
    """The API key that created the row; only it or an ``admin`` key may change or delete the
    row. NULL (rows older than ownership, datasheet profiles): ``admin`` keys only."""


class HardwareProfile(Base):
    """An accelerator profile: datasheet figures (seeded) or a custom one (made via the API)."""

    __tablename__ = "hardware_profile"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    """``datasheet`` (seeded from the reference table) or ``custom``."""
    vendor: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    memory_bytes: Mapped[int] = mapped_column(BigInteger)
    memory_type: Mapped[str | None] = mapped_column(String(32), default=None)
    memory_bandwidth_bytes_per_s: Mapped[int] = mapped_column(BigInteger)
    peak_tflop_per_s: Mapped[dict[str, float | None]] = mapped_column(JSON)
    interconnect_kind: Mapped[str | None] = mapped_column(String(32), default=None)
    interconnect_bandwidth_bytes_per_s: Mapped[int | None] = mapped_column(BigInteger, default=None)
    gpus_per_node: Mapped[int] = mapped_column(Integer, default=8)
    inter_node: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """The link between nodes (``InterNodeLink`` fields); NULL: the documented default for the
    interconnect (``core.hardware.default_inter_node``)."""
    tdp_w: Mapped[float | None] = mapped_column(Float, default=None)
    host_link_bytes_per_s: Mapped[int | None] = mapped_column(BigInteger, default=None)
    """GPU-to-host bandwidth per direction (KV offload loads); NULL: the documented default
    (``core.hardware.host_link_bandwidth``)."""
    host_memory_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    """Host memory per GPU; NULL: unknown."""
    price_per_gpu_hour: Mapped[float | None] = mapped_column(Float, default=None)
    price_currency: Mapped[str | None] = mapped_column(String(3), default=None)
    price_as_of: Mapped[date | None] = mapped_column(Date, default=None)
    price_source: Mapped[str | None] = mapped_column(Text, default=None)
    identity_tokens: Mapped[list[str]] = mapped_column(JSON)
    """Words a measured device's name must contain (see ``core.hardware.identity``)."""
    source: Mapped[str | None] = mapped_column(Text, default=None)
    notes: Mapped[str | None] = mapped_column(Text, default=None)
    unverified_fields: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    version: Mapped[int] = mapped_column(Integer)
    """Bumped on every update; the ETag, so concurrent editors cannot overwrite each other."""
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None
    )
    """The API key that created the row; only it or an ``admin`` key may change or delete the
    row. NULL (rows older than ownership, datasheet profiles): ``admin`` keys only."""

    __mapper_args__ = {"version_id_col": version}  # noqa: RUF012

    def to_spec(self) -> HardwareSpec:
        """The core value object the planner computes with."""
        link = (
            Interconnect(
                kind=self.interconnect_kind,
                bandwidth_bytes_per_s=self.interconnect_bandwidth_bytes_per_s,
                gpus_per_node=self.gpus_per_node,
            )
            if self.interconnect_kind is not None
            else None
        )
        return HardwareSpec(
            id=self.id,
            vendor=self.vendor,
            name=self.name,
            memory_bytes=self.memory_bytes,
            memory_bandwidth_bytes_per_s=self.memory_bandwidth_bytes_per_s,
            peak_tflop_per_s=dict(self.peak_tflop_per_s),
            interconnect=link,
            inter_node=inter_node_from_json(self.inter_node),
            memory_type=self.memory_type,
            tdp_w=self.tdp_w,
            host_link_bytes_per_s=self.host_link_bytes_per_s,
            host_memory_bytes=self.host_memory_bytes,
        )


def inter_node_from_json(value: dict[str, Any] | None) -> InterNodeLink | None:
    """The stored ``inter_node`` column as the core value."""
    if not value:
        return None
    domain = value.get("domain_gpus")
    return InterNodeLink(
        kind=str(value["kind"]),
        bandwidth_bytes_per_s=int(value["bandwidth_bytes_per_s"]),
        latency_s=float(value["latency_s"]),
        domain_gpus=None if domain is None else int(domain),
    )


def inter_node_json(link: InterNodeLink | None) -> dict[str, Any] | None:
    """The core value as stored in the ``inter_node`` column."""
    if link is None:
        return None
    return {
        "kind": link.kind,
        "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
        "latency_s": link.latency_s,
        "domain_gpus": link.domain_gpus,
    }


class HardwareMeasurement(Base):
    """One uploaded set of measurements; never updated, never overwritten."""

    __tablename__ = "hardware_measurement"
    __table_args__ = (UniqueConstraint("api_key_id", "idempotency_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    profile_id: Mapped[str] = mapped_column(
        ForeignKey("hardware_profile.id", ondelete="RESTRICT"), index=True
    )
    api_key_id: Mapped[int] = mapped_column(ForeignKey("api_key.id", ondelete="RESTRICT"))
    idempotency_key: Mapped[str] = mapped_column(String(255))
    request_sha256: Mapped[str] = mapped_column(String(64))
    """Fingerprint of method, path and canonical body: a replay must match it exactly."""
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    measured_at: Mapped[datetime] = mapped_column(UTCDateTime())
    agent_version: Mapped[str] = mapped_column(String(64))
    method_version: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(255))
    device: Mapped[str] = mapped_column(String(64))
    gpu_name: Mapped[str] = mapped_column(String(255))
    gpu_uuid: Mapped[str | None] = mapped_column(String(128), default=None)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The validated upload, verbatim."""
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None
    )
    """The API key that created the row; only it or an ``admin`` key may change or delete the
    row. NULL (rows older than ownership, datasheet profiles): ``admin`` keys only."""


class SavedPlan(Base):
    """A stored ``/v1/sizing`` answer and every input that determined it; never updated."""

    __tablename__ = "saved_plan"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    """Public id, ``pln_<16 hex digits>``."""
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None, index=True
    )
    """The API key that stored it."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    model_id: Mapped[str] = mapped_column(String(255))
    model_config_sha256: Mapped[str] = mapped_column(String(64))
    service_version: Mapped[str] = mapped_column(String(64))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The request body as validated (defaults filled in)."""
    model_config_json: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The resolved ``config.json`` the plan was computed from."""
    hardware: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    """Per searched profile: id, version and the ids of the measurements read."""
    prices: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Per profile: the price used and its origin (request, profile, sheet)."""
    response: Mapped[dict[str, Any]] = mapped_column(JSON)


class PlanVerification(Base):
    """One ``POST /v1/plans/{id}/verify`` answer: a ranked plan against a measured level; never
    updated. Feeds ``GET /v1/accuracy``."""

    __tablename__ = "plan_verification"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[str] = mapped_column(
        ForeignKey("saved_plan.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    verifier_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None, index=True
    )
    """The API key that asked, if any."""
    rank: Mapped[int] = mapped_column(Integer)
    engine: Mapped[str] = mapped_column(String(32))
    hardware: Mapped[str] = mapped_column(String(64))
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The verify answer as returned (metrics predicted against measured, SLO held)."""


class Job(Base):
    """A planning request run in the background (``POST /v1/jobs``) and its outcome."""

    __tablename__ = "job"
    __table_args__ = (UniqueConstraint("owner_key_id", "idempotency_key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    """Public id, ``job_<16 hex digits>``."""
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None, index=True
    )
    """The API key that submitted it; only it or an ``admin`` key may read or cancel it."""
    kind: Mapped[str] = mapped_column(String(16))
    """``sizing``, ``capacity`` or ``simulate``."""
    state: Mapped[str] = mapped_column(String(16), index=True)
    """``queued``, ``running``, ``succeeded``, ``failed`` or ``cancelled``."""
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The inner request body as validated (defaults filled in)."""
    request_sha256: Mapped[str] = mapped_column(String(64))
    """Fingerprint of the kind and the canonical request: an idempotent replay must match it."""
    idempotency_key: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    progress_done: Mapped[int | None] = mapped_column(Integer, default=None)
    progress_total: Mapped[int | None] = mapped_column(Integer, default=None)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """The synchronous endpoint's response body, once succeeded."""
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """An RFC 9457 problem (``status``, ``type`` slug, ``detail``, ...), once failed."""
    owner_process: Mapped[str | None] = mapped_column(String(128), default=None, index=True)
    """The API process running it, ``<host>:<pid>:<random>``; ``None`` for rows from before
    several processes (revision ``2026_12_03_shared_state``)."""
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    """Renewed by the owner's heartbeat while the job is queued or running; once past, the
    owner is taken to have stopped and the job is failed as interrupted."""


class EngineCalibration(Base):
    """Engine constants refitted for one hardware profile from its stored endpoint benchmarks
    (``POST /v1/hardware/{id}/recalibration`` with ``apply``); the newest per profile and
    engine is used by later predictions on that profile, which name it."""

    __tablename__ = "engine_calibration"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    """Public id, ``cal_<16 hex digits>``."""
    profile_id: Mapped[str] = mapped_column(
        ForeignKey("hardware_profile.id", ondelete="CASCADE"), index=True
    )
    engine: Mapped[str] = mapped_column(String(32))
    model_id: Mapped[str] = mapped_column(String(255))
    """The model whose benchmarks were fitted."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None
    )
    measurement_ids: Mapped[list[int]] = mapped_column(JSON)
    fitted: Mapped[dict[str, float]] = mapped_column(JSON)
    """The fitted parameters (``request_overhead_s``, ``step_time_scale``)."""
    constants: Mapped[dict[str, float]] = mapped_column(JSON)
    """The engine constants predictions use (``EngineProfile`` fields)."""
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The preview that was applied: constants and errors before/after, per level."""


class RateLimitCounter(Base):
    """One fixed-window request counter shared by the API processes (``STATE_STORE=database``);
    the key names the policy, the client and the window, so a new window is a new row."""

    __tablename__ = "rate_limit"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class SizingAnswer(Base):
    """A sizing response shared by the API processes, by its input hash
    (:func:`servesize.api.sizing_cache.sizing_key`), until ``expires_at``."""

    __tablename__ = "sizing_answer"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class StoredTrace(Base):
    """An uploaded request trace (``POST /v1/traces``), replayed by ``traffic.trace_id``;
    never updated."""

    __tablename__ = "stored_trace"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    """Public id, ``trc_<16 hex digits>``."""
    owner_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_key.id", ondelete="SET NULL"), default=None, index=True
    )
    """The API key that uploaded it; only it or an ``admin`` key may delete it."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    name: Mapped[str | None] = mapped_column(String(200), default=None)
    format: Mapped[str] = mapped_column(String(16))
    """``csv``, ``jsonl``, ``azure`` or ``vllm`` (:mod:`servesize.core.traffic.traces`)."""
    content: Mapped[str] = mapped_column(Text)
    """The file's text as uploaded."""
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    """UTF-8 bytes of ``content``."""
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Requests, duration, rate and length statistics, computed at upload."""
