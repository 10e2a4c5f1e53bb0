"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import Scope

from servesize import __version__
from servesize.api.compute import ComputeGate, Gates
from servesize.api.errors import install_error_handlers
from servesize.api.logs import configure_logging
from servesize.api.lookups import LookupCache
from servesize.api.metrics import HttpMetrics
from servesize.api.middleware import BodyGuardMiddleware, RequestContextMiddleware
from servesize.api.ratelimit import RateLimiter
from servesize.api.routes import (
    hardware,
    health,
    keys,
    memory,
    models,
    performance,
    plans,
    queueing,
    simulate,
    sizing,
    slo,
)
from servesize.api.routes.models import CatalogIndex
from servesize.api.sizing_cache import SizingCache
from servesize.catalog import ModelCatalog
from servesize.db.connection import create_db_engine, make_sessionmaker
from servesize.security import parse_key
from servesize.settings import Settings, get_settings

DESCRIPTION = """\
Capacity planning for LLM inference serving: for a model architecture, a hardware profile, an
engine configuration and a traffic spec, servesize answers what fits in memory, how fast each
step runs, what latency users see under load, and the cheapest deployment that meets an SLO.

Every error is an RFC 9457 problem (`application/problem+json`). Writes need an API key
(`Authorization: Bearer <key>`) with the right scope.
"""


def _client_key(scope: Scope) -> str:
    """Rate-limit identity: the presented key's public id, else the client address."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            token = value.decode("latin-1").partition(" ")[2].strip()
            parts = parse_key(token)
            if parts is not None:
                return "key:" + parts.key_id
    client = scope.get("client")
    return "addr:" + (client[0] if client else "unknown")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app. ``uvicorn --factory servesize.api.app:create_app`` reads the environment;
    tests pass their own settings. The database pool is created here, not at import time."""
    settings = settings or get_settings()
    configure_logging(settings.log_level)
    in_memory = ":memory:" in settings.database_url  # SQLite's single-connection pool
    pool = (
        {}
        if in_memory
        else {
            "pool_size": settings.db_pool_size,
            "max_overflow": settings.db_max_overflow,
            "pool_timeout": settings.db_pool_timeout_s,
        }
    )
    db_engine = create_db_engine(settings.database_url, **pool)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        db_engine.dispose()

    app = FastAPI(
        title="servesize",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        responses={
            422: {"description": "Validation failed (problem+json with each field's pointer)"}
        },
    )
    app.state.settings = settings
    app.state.db_engine = db_engine
    app.state.sessionmaker = make_sessionmaker(db_engine)
    app.state.metrics = HttpMetrics()
    catalog = ModelCatalog(settings.models_dir)
    app.state.catalog_index = CatalogIndex(catalog)
    app.state.lookups = LookupCache(
        app.state.sessionmaker, catalog, ttl_s=settings.lookup_cache_ttl_s
    )
    app.state.gates = Gates(
        estimate=ComputeGate(
            "estimate",
            workers=settings.compute_workers,
            queue=settings.compute_queue,
            deadline_s=settings.compute_deadline_s,
        ),
        heavy=ComputeGate(
            "simulation",
            workers=settings.heavy_workers,
            queue=settings.heavy_queue,
            deadline_s=settings.compute_deadline_s,
        ),
    )
    app.state.sizing_cache = SizingCache()
    install_error_handlers(app)

    app.include_router(health.router)
    # Each router carries its full "/v1/..." prefix so route templates stay exact in metrics.
    for module in (
        keys,
        models,
        hardware,
        memory,
        performance,
        queueing,
        simulate,
        slo,
        sizing,
        plans,
    ):
        app.include_router(module.router)

    limiter = (
        RateLimiter(settings.rate_limit_per_minute) if settings.rate_limit_per_minute else None
    )
    app.add_middleware(
        BodyGuardMiddleware,
        max_body_bytes=settings.max_body_bytes,
        rate_limiter=limiter,
        client_key=_client_key,
    )
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)
    return app
