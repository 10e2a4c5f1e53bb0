"""JSON log lines on standard error, each carrying the request id of the request being served."""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

_STANDARD_ATTRS = set(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI-coloured copy of the message
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, pid, request_id and any
    extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,  # which API process (``serve --workers N``) wrote it
        }
        request_id = request_id_var.get()
        if request_id is not None:
            entry["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of each record (a handler made once
    per process must follow a stream replaced later, as test runners and daemonisers do)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(level: str) -> None:
    """Route the ``servesize`` loggers to standard error as JSON (idempotent)."""
    logger = logging.getLogger("servesize")
    logger.setLevel(level)
    if not any(getattr(h, "_servesize", False) for h in logger.handlers):
        handler = StderrHandler()
        handler.setFormatter(JsonFormatter())
        handler._servesize = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False


def logging_config(level: str) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` document that writes every logger as JSON lines on
    standard error: the root logger (so Alembic and SQLAlchemy, which propagate to it) and
    uvicorn's loggers, which uvicorn would otherwise format as plain text. Passed to uvicorn as
    ``log_config`` by ``servesize serve``; the ``servesize`` loggers keep the handler
    :func:`configure_logging` gives them. Existing loggers stay enabled."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": {"()": f"{__name__}.StderrHandler", "formatter": "json"}},
        "root": {"handlers": ["stderr"], "level": "WARNING"},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"level": level},
            "alembic": {"level": level},
            "sqlalchemy": {"level": "WARNING"},
        },
    }
