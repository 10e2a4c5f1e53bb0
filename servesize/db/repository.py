"""Every query lives here; routes and the CLI call these, never SQL directly."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from servesize.db.models import (
    ApiKey,
    CustomModel,
    EngineCalibration,
    HardwareMeasurement,
    HardwareProfile,
    InstanceSecret,
    Job,
    PlanVerification,
    RateLimitCounter,
    SavedPlan,
    SizingAnswer,
    StoredTrace,
)
from servesize.db.types import utc_now
from servesize.security import NewKey, Scope, generate_key, hash_secret, parse_key, verify_secret

_UNMATCHABLE_HASH = "z" * 64
"""Compared against for unknown key ids: as long as a real hex digest, never equal to one."""


class ApiKeyRepository:
    """API keys: create, list, revoke and authenticate."""

    def __init__(self, session: Session, *, secret_key: bytes | None = None) -> None:
        self.session = session
        self._secret_key = secret_key

    def instance_secret(self) -> bytes:
        """``SECRET_KEY`` when configured, else the random secret the first migration stored."""
        if self._secret_key is not None:
            return self._secret_key
        row = self.session.get(InstanceSecret, 1)
        if row is None:
            raise RuntimeError("the database has no instance secret; run the migrations")
        return bytes.fromhex(row.secret_hex)

    def create(
        self, *, name: str, scopes: Sequence[Scope], created_by: int | None = None
    ) -> tuple[ApiKey, NewKey]:
        new = generate_key()
        row = ApiKey(
            key_id=new.key_id,
            name=name,
            key_hash=hash_secret(new.secret, instance_secret=self.instance_secret()),
            scopes=sorted({s.value for s in scopes}),
            created_at=utc_now(),
            created_by=created_by,
        )
        self.session.add(row)
        self.session.flush()
        return row, new

    def list(self) -> Sequence[ApiKey]:
        return self.session.scalars(select(ApiKey).order_by(ApiKey.id)).all()

    def get(self, key_id: str) -> ApiKey | None:
        return self.session.scalar(select(ApiKey).where(ApiKey.key_id == key_id))

    def live_admin_count(self) -> int:
        """Keys not revoked whose scopes include ``admin``."""
        live = self.session.scalars(select(ApiKey).where(ApiKey.revoked_at.is_(None))).all()
        return sum(1 for row in live if Scope.ADMIN.value in row.scopes)

    def revoke(self, key_id: str) -> ApiKey | None:
        """Mark a key revoked (idempotent); ``None`` when no such key exists."""
        row = self.get(key_id)
        if row is not None and row.revoked_at is None:
            row.revoked_at = utc_now()
            self.session.flush()
        return row

    def authenticate(self, token: str) -> ApiKey | None:
        """The live key that ``token`` presents, or ``None`` (unknown, wrong or revoked)."""
        parts = parse_key(token)
        if parts is None:
            return None
        row = self.get(parts.key_id)
        # The same work whether or not the id exists, so timing does not reveal key ids: the
        # instance secret is read and the HMAC compared (in constant time) in both cases, an
        # unknown id against a hash no secret produces.
        instance_secret = self.instance_secret()
        stored_hash = row.key_hash if row is not None else _UNMATCHABLE_HASH
        matches = verify_secret(parts.secret, stored_hash, instance_secret=instance_secret)
        if row is None or not matches or row.revoked:
            return None
        return row


class CustomModelRepository:
    """Model architectures registered through the API."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, model_id: str) -> CustomModel | None:
        return self.session.scalar(select(CustomModel).where(CustomModel.model_id == model_id))

    def list(self) -> Sequence[CustomModel]:
        return self.session.scalars(select(CustomModel).order_by(CustomModel.model_id)).all()

    def add(
        self, *, model_id: str, config: dict[str, object], created_by: int | None
    ) -> CustomModel:
        row = CustomModel(
            model_id=model_id,
            config=config,
            created_at=utc_now(),
            created_by=created_by,
            owner_key_id=created_by,
        )
        self.session.add(row)
        self.session.flush()
        return row

    def delete(self, row: CustomModel) -> None:
        self.session.delete(row)
        self.session.flush()


class HardwareRepository:
    """Hardware profiles and their measurements."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, profile_id: str) -> HardwareProfile | None:
        return self.session.get(HardwareProfile, profile_id)

    def page(
        self, *, offset: int, limit: int, vendor: str | None, kind: str | None
    ) -> tuple[Sequence[HardwareProfile], int]:
        query = select(HardwareProfile)
        if vendor is not None:
            query = query.where(func.lower(HardwareProfile.vendor) == vendor.lower())
        if kind is not None:
            query = query.where(HardwareProfile.kind == kind)
        total = self.session.scalar(select(func.count()).select_from(query.subquery())) or 0
        rows = self.session.scalars(
            query.order_by(HardwareProfile.id).offset(offset).limit(limit)
        ).all()
        return rows, total

    def add(self, row: HardwareProfile) -> HardwareProfile:
        self.session.add(row)
        self.session.flush()
        return row

    def delete(self, row: HardwareProfile) -> None:
        self.session.delete(row)
        self.session.flush()

    def measurement_counts(self, profile_ids: Sequence[str]) -> dict[str, int]:
        if not profile_ids:
            return {}
        rows = self.session.execute(
            select(HardwareMeasurement.profile_id, func.count())
            .where(HardwareMeasurement.profile_id.in_(profile_ids))
            .group_by(HardwareMeasurement.profile_id)
        ).all()
        return {profile_id: int(count) for profile_id, count in rows}

    def measurements(
        self, profile_id: str, *, offset: int = 0, limit: int | None = None
    ) -> Sequence[HardwareMeasurement]:
        """Newest first."""
        query = (
            select(HardwareMeasurement)
            .where(HardwareMeasurement.profile_id == profile_id)
            .order_by(HardwareMeasurement.id.desc())
            .offset(offset)
        )
        if limit is not None:
            query = query.limit(limit)
        return self.session.scalars(query).all()

    def get_measurement(self, profile_id: str, measurement_id: int) -> HardwareMeasurement | None:
        row = self.session.get(HardwareMeasurement, measurement_id)
        return row if row is not None and row.profile_id == profile_id else None

    def by_idempotency_key(self, api_key_id: int, key: str) -> HardwareMeasurement | None:
        return self.session.scalar(
            select(HardwareMeasurement).where(
                HardwareMeasurement.api_key_id == api_key_id,
                HardwareMeasurement.idempotency_key == key,
            )
        )

    def add_measurement(self, row: HardwareMeasurement) -> HardwareMeasurement:
        self.session.add(row)
        self.session.flush()
        return row


class PlanRepository:
    """Saved sizing answers."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, plan_id: str) -> SavedPlan | None:
        return self.session.get(SavedPlan, plan_id)

    def add(self, row: SavedPlan) -> SavedPlan:
        self.session.add(row)
        self.session.flush()
        return row

    def add_verification(self, row: PlanVerification) -> PlanVerification:
        self.session.add(row)
        self.session.flush()
        return row

    def verifications(self, plan_id: str) -> list[PlanVerification]:
        """The plan's stored verifications, oldest first."""
        query = select(PlanVerification).where(PlanVerification.plan_id == plan_id)
        return list(self.session.scalars(query.order_by(PlanVerification.id)))

    def all_verifications(
        self, *, engine: str | None = None, hardware: str | None = None
    ) -> list[PlanVerification]:
        """Every stored verification (optionally of one engine or hardware), oldest first."""
        query = select(PlanVerification)
        if engine is not None:
            query = query.where(PlanVerification.engine == engine)
        if hardware is not None:
            query = query.where(PlanVerification.hardware == hardware)
        return list(self.session.scalars(query.order_by(PlanVerification.id)))


ACTIVE_JOB_STATES = ("queued", "running")


class JobRepository:
    """Background jobs. State changes are conditional updates, so a late callback never
    overwrites a job that was cancelled (or failed by a restart) in the meantime."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, job_id: str) -> Job | None:
        return self.session.get(Job, job_id)

    def add(self, row: Job) -> Job:
        self.session.add(row)
        self.session.flush()
        return row

    def by_idempotency_key(self, owner_key_id: int, key: str) -> Job | None:
        return self.session.scalars(
            select(Job).where(Job.owner_key_id == owner_key_id, Job.idempotency_key == key)
        ).first()

    def page(
        self, *, owner_key_id: int | None, state: str | None, offset: int, limit: int
    ) -> tuple[Sequence[Job], int]:
        """Newest first; ``owner_key_id=None`` lists every owner's jobs (admin)."""
        query = select(Job)
        if owner_key_id is not None:
            query = query.where(Job.owner_key_id == owner_key_id)
        if state is not None:
            query = query.where(Job.state == state)
        total = self.session.scalar(select(func.count()).select_from(query.subquery())) or 0
        rows = self.session.scalars(
            query.order_by(Job.created_at.desc(), Job.id.desc()).offset(offset).limit(limit)
        ).all()
        return rows, total

    def mark_started(self, job_id: str, started_at: datetime) -> None:
        self.session.execute(
            update(Job)
            .where(Job.id == job_id, Job.state == "queued")
            .values(state="running", started_at=started_at)
        )

    def progress(self, job_id: str, done: int, total: int | None) -> None:
        self.session.execute(
            update(Job)
            .where(Job.id == job_id, Job.state.in_(ACTIVE_JOB_STATES))
            .values(progress_done=done, progress_total=total)
        )

    def finish(
        self,
        job_id: str,
        *,
        state: str,
        started_at: datetime | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        progress: tuple[int, int | None] | None = None,
    ) -> bool:
        """End a job that is still queued or running; False if it had already ended."""
        values: dict[str, Any] = {
            "state": state,
            "finished_at": utc_now(),
            "result": result,
            "error": error,
        }
        if progress is not None:
            values["progress_done"], values["progress_total"] = progress
        if started_at is not None:
            values["started_at"] = func.coalesce(Job.started_at, started_at)
        done = self.session.execute(
            update(Job).where(Job.id == job_id, Job.state.in_(ACTIVE_JOB_STATES)).values(**values)
        )
        return bool(getattr(done, "rowcount", 0))

    def fail_unfinished(self, error: dict[str, Any]) -> int:
        """Mark every queued or running job failed (a previous process left them); returns how
        many."""
        done = self.session.execute(
            update(Job)
            .where(Job.state.in_(ACTIVE_JOB_STATES))
            .values(state="failed", finished_at=utc_now(), error=error)
        )
        return int(getattr(done, "rowcount", 0))

    def renew_leases(self, owner_process: str, expires_at: datetime) -> int:
        """Extend the lease of every unfinished job ``owner_process`` runs; returns how many."""
        done = self.session.execute(
            update(Job)
            .where(Job.owner_process == owner_process, Job.state.in_(ACTIVE_JOB_STATES))
            .values(lease_expires_at=expires_at)
        )
        return int(getattr(done, "rowcount", 0))

    def ended_of(self, owner_process: str, job_ids: Sequence[str]) -> list[str]:
        """Those of ``job_ids`` (run by ``owner_process``) that ended in the database while
        its process still runs them: cancelled by another process's ``DELETE``, or failed as
        interrupted by another process that found the lease lapsed."""
        if not job_ids:
            return []
        return list(
            self.session.scalars(
                select(Job.id).where(
                    Job.id.in_(job_ids),
                    Job.owner_process == owner_process,
                    Job.state.not_in(ACTIVE_JOB_STATES),
                )
            )
        )

    def active_owners(self) -> list[str]:
        """The processes named as owners of unfinished jobs."""
        return list(
            self.session.scalars(
                select(Job.owner_process)
                .where(Job.state.in_(ACTIVE_JOB_STATES), Job.owner_process.is_not(None))
                .distinct()
            )
        )

    def fail_interrupted(
        self,
        error: dict[str, Any],
        *,
        now: datetime,
        dead_owners: Sequence[str] = (),
        job_id: str | None = None,
    ) -> int:
        """Fail unfinished jobs whose lease lapsed before ``now`` or whose owner is one of
        ``dead_owners`` (only ``job_id`` when given); returns how many."""
        lapsed = Job.lease_expires_at < now
        query = update(Job).where(
            Job.state.in_(ACTIVE_JOB_STATES),
            Job.owner_process.is_not(None),
            or_(lapsed, Job.owner_process.in_(dead_owners)) if dead_owners else lapsed,
        )
        if job_id is not None:
            query = query.where(Job.id == job_id)
        done = self.session.execute(
            query.values(state="failed", finished_at=utc_now(), error=error)
        )
        return int(getattr(done, "rowcount", 0))

    def claim_interrupted(
        self,
        owner_process: str,
        expires_at: datetime,
        *,
        now: datetime,
        dead_owners: Sequence[str] = (),
        job_id: str | None = None,
    ) -> list[Job]:
        """Take over the unfinished jobs :meth:`fail_interrupted` would fail: each one whose
        owner is still the one read is given to ``owner_process`` with a fresh lease (a
        conditional update, so two processes never claim one job); returns those claimed."""
        lapsed = Job.lease_expires_at < now
        query = select(Job).where(
            Job.state.in_(ACTIVE_JOB_STATES),
            Job.owner_process.is_not(None),
            Job.owner_process != owner_process,
            or_(lapsed, Job.owner_process.in_(dead_owners)) if dead_owners else lapsed,
        )
        if job_id is not None:
            query = query.where(Job.id == job_id)
        claimed: list[Job] = []
        for row in self.session.scalars(query).all():
            done = self.session.execute(
                update(Job)
                .where(Job.id == row.id, Job.owner_process == row.owner_process)
                .values(owner_process=owner_process, lease_expires_at=expires_at)
                .execution_options(synchronize_session=False)
            )
            if getattr(done, "rowcount", 0):
                claimed.append(row)
        return claimed

    def fail_unowned(self, error: dict[str, Any]) -> int:
        """Fail unfinished jobs that name no owner process (left by a version that ran one
        process); returns how many."""
        done = self.session.execute(
            update(Job)
            .where(Job.state.in_(ACTIVE_JOB_STATES), Job.owner_process.is_(None))
            .values(state="failed", finished_at=utc_now(), error=error)
        )
        return int(getattr(done, "rowcount", 0))


def _upsert(session: Session, model: type[Any]) -> Any:
    """The dialect's ``INSERT`` that takes ``ON CONFLICT ... DO UPDATE`` (SQLite ≥ 3.24 and
    PostgreSQL both have it, with ``RETURNING``)."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(model)
    if dialect == "sqlite":
        return sqlite.insert(model)
    raise NotImplementedError(f"no atomic upsert for {dialect}")


class RateLimitRepository:
    """Fixed-window counters shared by the API processes."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def hit(self, key: str, expires_at: datetime) -> int:
        """Add one to ``key``'s counter (created at 1) in one statement; the new count."""
        insert = _upsert(self.session, RateLimitCounter).values(
            key=key, count=1, expires_at=expires_at
        )
        statement = insert.on_conflict_do_update(
            index_elements=[RateLimitCounter.key],
            set_={"count": RateLimitCounter.count + 1},
        ).returning(RateLimitCounter.count)
        return int(self.session.execute(statement).scalar_one())

    def count(self, key: str) -> int:
        value = self.session.scalar(
            select(RateLimitCounter.count).where(RateLimitCounter.key == key)
        )
        return int(value or 0)

    def purge(self, now: datetime) -> int:
        """Delete the counters of windows that ended before ``now``."""
        done = self.session.execute(
            delete(RateLimitCounter).where(RateLimitCounter.expires_at < now)
        )
        return int(getattr(done, "rowcount", 0))


class SizingAnswerRepository:
    """Sizing responses shared by the API processes, by input hash, until they expire."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, key: str, now: datetime) -> dict[str, Any] | None:
        return self.session.scalar(
            select(SizingAnswer.body).where(SizingAnswer.key == key, SizingAnswer.expires_at > now)
        )

    def put(self, key: str, body: dict[str, Any], expires_at: datetime) -> None:
        """Store (or replace) the answer; answers that expired are deleted on the way."""
        self.session.execute(delete(SizingAnswer).where(SizingAnswer.expires_at < utc_now()))
        insert = _upsert(self.session, SizingAnswer).values(
            key=key, body=body, expires_at=expires_at
        )
        self.session.execute(
            insert.on_conflict_do_update(
                index_elements=[SizingAnswer.key],
                set_={"body": insert.excluded.body, "expires_at": insert.excluded.expires_at},
            )
        )


class CalibrationRepository:
    """Engine recalibrations of hardware profiles, newest first."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, row: EngineCalibration) -> EngineCalibration:
        self.session.add(row)
        self.session.flush()
        return row

    def for_profile(self, profile_id: str) -> list[EngineCalibration]:
        return list(
            self.session.scalars(
                select(EngineCalibration)
                .where(EngineCalibration.profile_id == profile_id)
                .order_by(EngineCalibration.created_at.desc(), EngineCalibration.id.desc())
            )
        )

    def get(self, profile_id: str, calibration_id: str) -> EngineCalibration | None:
        row = self.session.get(EngineCalibration, calibration_id)
        return row if row is not None and row.profile_id == profile_id else None

    def delete(self, row: EngineCalibration) -> None:
        self.session.delete(row)
        self.session.flush()


class TraceRepository:
    """Uploaded request traces."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, trace_id: str) -> StoredTrace | None:
        return self.session.get(StoredTrace, trace_id)

    def add(self, row: StoredTrace) -> StoredTrace:
        self.session.add(row)
        self.session.flush()
        return row

    def delete(self, row: StoredTrace) -> None:
        self.session.delete(row)
        self.session.flush()
