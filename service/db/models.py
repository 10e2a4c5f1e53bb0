"""ORM tables. Byte and token counts use BigInteger (80 GiB overflows a 32-bit INTEGER)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from service.db.base import Base
from service.db.types import UTCDateTime, utc_now


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
