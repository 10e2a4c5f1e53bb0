"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import Scope

from servesize import __version__
from servesize.api.errors import install_error_handlers
from servesize.api.input_limits import refuse_nul_parameters
from servesize.api.logs import configure_logging
from servesize.api.metrics import HttpMetrics
from servesize.api.middleware import BodyGuardMiddleware, RequestContextMiddleware
from servesize.api.openapi import install_openapi, operation_id
from servesize.api.ratelimit import RateLimiter
from servesize.api.routes import (
    hardware,
    health,
    keys,
    memory,
    models,
    performance,
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
    db_engine = create_db_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        db_engine.dispose()

    app = FastAPI(
        title="servesize",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        dependencies=[Depends(refuse_nul_parameters)],
    )
    app.state.settings = settings
    app.state.db_engine = db_engine
    app.state.sessionmaker = make_sessionmaker(db_engine)
    app.state.metrics = HttpMetrics()
    app.state.catalog_index = CatalogIndex(ModelCatalog(settings.models_dir))
    app.state.sizing_cache = SizingCache()
    install_error_handlers(app)

    app.include_router(health.router)
    # Each router carries its full "/v1/..." prefix so route templates stay exact in metrics.
    for module in (keys, models, hardware, memory, performance, queueing, simulate, slo, sizing):
        app.include_router(module.router)
    install_openapi(app)

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
