"""In-process caches of what a planning request looks up: hardware profiles (with their kernel
tables) and model configs (catalogue and custom), so that a request needs no database session
while the cache is fresh, and reads and parses each ``config.json`` once.

Freshness:

* catalogue models never change while the process runs (the files are listed at start);
* a write through this process's sessions invalidates at commit: the session factory's
  ``after_flush`` hook notes which kinds of rows changed and ``after_commit`` drops them;
* a write by another process (another worker, the CLI) is seen once the entry is older than
  ``ttl_s``: it is then checked against the database with a query that reads no payload (the
  profile's ``version`` and its newest measurement ids; the custom model's row id and
  creation time) and reloaded only if they differ.

A load that raced an invalidation (it read before a commit and would store after it) is not
stored: every invalidation bumps a generation number that the load compares.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from servesize.api.errors import NotFoundError
from servesize.api.measured import measured_power, measured_profile
from servesize.api.models_resolver import ResolvedModel, parse_inline
from servesize.catalog import ModelCatalog
from servesize.core.architecture import parse_architecture
from servesize.core.energy import PowerProfile
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import MeasuredProfile
from servesize.db.connection import transaction
from servesize.db.models import (
    CustomModel,
    EngineCalibration,
    HardwareMeasurement,
    HardwareProfile,
)
from servesize.db.repository import (
    CalibrationRepository,
    CustomModelRepository,
    HardwareRepository,
)
from servesize.schemas.models import InlineModel, ModelRef

__all__ = ["RECENT_UPLOADS", "ActiveCalibration", "HardwareEntry", "LookupCache"]

RECENT_UPLOADS = 20
"""Measurements searched for the newest GEMM table of a profile."""

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ActiveCalibration:
    """The newest stored recalibration of one engine on a profile (``engine_calibration``)."""

    id: str
    engine: str
    model_id: str
    created_at: datetime
    constants: dict[str, float]
    """``EngineProfile`` fields that replace the engine's fitted constants."""

    def note(self) -> str:
        return (
            f"engine constants of {self.engine} on this hardware profile come from recalibration "
            f"{self.id} of {self.created_at.date().isoformat()} (fitted to {self.model_id} "
            "endpoint benchmarks), not the shipped calibration"
        )


@dataclass(frozen=True, slots=True)
class HardwareEntry:
    """A stored profile as the planners use it (shared between requests: read only)."""

    spec: HardwareSpec
    version: int
    price_per_gpu_hour: float | None
    price_source: str | None
    price_as_of: Any
    """The profile's price provenance (``HardwareProfile.price_source``/``price_as_of``)."""
    measurement_ids: tuple[int, ...]
    """The newest :data:`RECENT_UPLOADS` measurement ids, newest first."""
    measured: MeasuredProfile | None
    """Kernel tables: shipped, scaled to this GPU, or from the newest upload with GEMM rows."""
    calibrations: dict[str, ActiveCalibration] = field(default_factory=dict)
    """The newest applied recalibration per engine."""
    power: PowerProfile | None = None
    """Board power: the newest upload's NVML samples, else the datasheet TDP (None: neither)."""


@dataclass(frozen=True, slots=True)
class _CustomEntry:
    row_id: int
    created_at: datetime
    model: ResolvedModel


@dataclass(slots=True)
class _Slot:
    value: Any
    stamp: Any
    checked_at: float


_KINDS: dict[type, str] = {
    HardwareProfile: "hardware",
    HardwareMeasurement: "hardware",
    EngineCalibration: "hardware",
    CustomModel: "custom",
}


class LookupCache:
    """See the module docstring. Thread-safe; one per application."""

    def __init__(
        self, factory: sessionmaker[Session], catalog: ModelCatalog, *, ttl_s: float
    ) -> None:
        self.factory = factory
        self.catalog = catalog
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._generation = 0
        self._slots: dict[str, dict[Any, _Slot]] = {"hardware": {}, "custom": {}}
        self._catalogue: dict[str, ResolvedModel] = {}
        self.loads = 0
        """Entries read from the database in full (a test's and the bench's window)."""
        event.listen(factory, "after_flush", self._note_changes)
        event.listen(factory, "after_commit", self._invalidate_noted)
        event.listen(factory, "after_rollback", self._forget_noted)

    # -- invalidation -------------------------------------------------------------------------

    @staticmethod
    def _note_changes(session: Session, _context: Any) -> None:
        kinds: set[str] = session.info.setdefault("lookup_kinds", set())
        for obj in (*session.new, *session.dirty, *session.deleted):
            kind = _KINDS.get(type(obj))
            if kind is not None:
                kinds.add(kind)

    def _invalidate_noted(self, session: Session) -> None:
        kinds = session.info.pop("lookup_kinds", None)
        if kinds:
            self.invalidate(*kinds)

    @staticmethod
    def _forget_noted(session: Session) -> None:
        session.info.pop("lookup_kinds", None)

    def invalidate(self, *kinds: str) -> None:
        """Drop every cached entry of these kinds (``hardware``, ``custom``)."""
        with self._lock:
            self._generation += 1
            for kind in kinds or tuple(self._slots):
                self._slots[kind].clear()

    # -- the generic fresh-or-reload step -----------------------------------------------------

    def _cached(
        self,
        kind: str,
        key: Any,
        stamp_of: Callable[[Session], Any],
        load: Callable[[Session], Any],
    ) -> Any:
        """The entry for ``key``: from the cache while fresh; after ``ttl_s`` re-stamped with
        ``stamp_of`` (cheap) and reloaded with ``load`` only when the stamp changed."""
        now = time.monotonic()
        with self._lock:
            slot = self._slots[kind].get(key)
            generation = self._generation
        if slot is not None and now - slot.checked_at < self.ttl_s:
            return slot.value
        with transaction(self.factory) as session:
            stamp = stamp_of(session)
            if slot is not None and stamp == slot.stamp and stamp is not None:
                value = slot.value
            else:
                value = load(session) if stamp is not None else None
                self.loads += 1
        with self._lock:
            if generation == self._generation and value is not None:
                self._slots[kind][key] = _Slot(value=value, stamp=stamp, checked_at=now)
        return value

    # -- hardware ------------------------------------------------------------------------------

    def hardware(self, profile_id: str) -> HardwareEntry | None:
        """The stored profile ``profile_id`` with its kernel tables, or ``None``."""

        def stamp_of(session: Session) -> tuple[int, tuple[int, ...]] | None:
            version = session.scalar(
                select(HardwareProfile.version).where(HardwareProfile.id == profile_id)
            )
            if version is None:
                return None
            ids = session.scalars(
                select(HardwareMeasurement.id)
                .where(HardwareMeasurement.profile_id == profile_id)
                .order_by(HardwareMeasurement.id.desc())
                .limit(RECENT_UPLOADS)
            ).all()
            return version, tuple(ids)

        def load(session: Session) -> HardwareEntry | None:
            repo = HardwareRepository(session)
            row = repo.get(profile_id)
            if row is None:
                return None
            uploads = [(m.id, m.payload) for m in repo.measurements(row.id, limit=RECENT_UPLOADS)]
            spec = row.to_spec()
            calibrations: dict[str, ActiveCalibration] = {}
            for cal in CalibrationRepository(session).for_profile(row.id):
                calibrations.setdefault(
                    cal.engine,
                    ActiveCalibration(
                        id=cal.id,
                        engine=cal.engine,
                        model_id=cal.model_id,
                        created_at=cal.created_at,
                        constants={k: float(v) for k, v in cal.constants.items()},
                    ),
                )
            return HardwareEntry(
                spec=spec,
                version=row.version,
                price_per_gpu_hour=row.price_per_gpu_hour,
                price_source=row.price_source,
                price_as_of=row.price_as_of,
                measurement_ids=tuple(mid for mid, _ in uploads),
                measured=measured_profile(row.id, uploads, spec),
                calibrations=calibrations,
                power=measured_power(spec, uploads),
            )

        entry = self._cached("hardware", profile_id, stamp_of, load)
        assert entry is None or isinstance(entry, HardwareEntry)
        return entry

    def require_hardware(self, profile_id: str) -> HardwareEntry:
        entry = self.hardware(profile_id)
        if entry is None:
            raise NotFoundError(f"no hardware profile {profile_id!r}")
        return entry

    def hardware_ids(self) -> list[str]:
        """Every stored profile id, sorted (read from the database each time)."""
        with transaction(self.factory) as session:
            return list(session.scalars(select(HardwareProfile.id).order_by(HardwareProfile.id)))

    # -- models --------------------------------------------------------------------------------

    def catalogue_model(self, model_id: str) -> ResolvedModel:
        """A catalogue model, its file read and parsed once per process."""
        with self._lock:
            hit = self._catalogue.get(model_id)
        if hit is not None:
            return hit
        config = self.catalog.config(model_id)
        model = ResolvedModel(
            id=model_id,
            source="catalogue",
            config=config,
            architecture=parse_architecture(config, name=model_id),
        )
        with self._lock:
            self._catalogue.setdefault(model_id, model)
        return model

    def custom_model(self, model_id: str) -> ResolvedModel | None:
        """A custom model, parsed once per registration; ``None`` if there is none."""

        def stamp_of(session: Session) -> tuple[int, datetime] | None:
            row = session.execute(
                select(CustomModel.id, CustomModel.created_at).where(
                    CustomModel.model_id == model_id
                )
            ).first()
            return None if row is None else (int(row[0]), row[1])

        def load(session: Session) -> _CustomEntry | None:
            row = CustomModelRepository(session).get(model_id)
            if row is None:
                return None
            model = ResolvedModel(
                id=model_id,
                source="custom",
                config=dict(row.config),
                architecture=parse_architecture(row.config, name=model_id),
            )
            return _CustomEntry(row_id=row.id, created_at=row.created_at, model=model)

        entry = self._cached("custom", model_id, stamp_of, load)
        return entry.model if isinstance(entry, _CustomEntry) else None

    def custom_models(self) -> list[ResolvedModel]:
        """Every custom model, sorted by id; each parsed once per registration."""

        def stamp_of(session: Session) -> tuple[tuple[str, int, datetime], ...]:
            rows = session.execute(
                select(CustomModel.model_id, CustomModel.id, CustomModel.created_at).order_by(
                    CustomModel.model_id
                )
            ).all()
            return tuple((str(r[0]), int(r[1]), r[2]) for r in rows)

        def load(session: Session) -> tuple[ResolvedModel, ...]:
            return tuple(
                ResolvedModel(
                    id=row.model_id,
                    source="custom",
                    config=dict(row.config),
                    architecture=parse_architecture(row.config, name=row.model_id),
                )
                for row in CustomModelRepository(session).list()
            )

        models = self._cached("custom", "*", stamp_of, load)
        return list(models)

    def model(self, ref: ModelRef, *, pointer: str = "/model") -> ResolvedModel:
        """The architecture ``ref`` names (catalogue, then custom, or inline); 404 if unknown."""
        if isinstance(ref, InlineModel):
            name = ref.name or "inline"
            arch = parse_inline(ref.hf_config, name=name, pointer=f"{pointer}/hf_config")
            return ResolvedModel(id=name, source="inline", config=ref.hf_config, architecture=arch)
        if ref in self.catalog:
            return self.catalogue_model(ref)
        model = self.custom_model(ref)
        if model is None:
            raise NotFoundError(f"no model {ref!r} in the catalogue or among custom models")
        return model
