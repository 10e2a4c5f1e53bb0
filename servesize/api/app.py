"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool

from servesize import __version__
from servesize.api.celery_jobs import CeleryJobExecutor, job_executor
from servesize.api.compute import ComputeGate, Gates
from servesize.api.errors import install_error_handlers
from servesize.api.html_reports import HtmlReportMiddleware
from servesize.api.input_limits import refuse_nul_parameters
from servesize.api.logs import configure_logging, logging_config
from servesize.api.lookups import LookupCache
from servesize.api.metrics import HttpMetrics
from servesize.api.middleware import (
    BodyGuardMiddleware,
    RateLimitMiddleware,
    RequestContextMiddleware,
)
from servesize.api.openapi import install_openapi, operation_id
from servesize.api.ratelimit import (
    AUTH_FAILURES_POLICY,
    REQUESTS_POLICY,
    RateLimiter,
    RateLimits,
    SharedRateLimiter,
    parse_networks,
)
from servesize.api.routes import (
    accuracy,
    hardware,
    health,
    job_exports,
    jobs,
    keys,
    memory,
    models,
    page,
    performance,
    plans,
    queueing,
    recalibration,
    simulate,
    sizing,
    slo,
    traces,
)
from servesize.api.routes.job_tasks import prepare_stored
from servesize.api.routes.models import CatalogIndex
from servesize.api.shared_state import CounterStore, shared_stores
from servesize.api.sizing_cache import SizingCache
from servesize.catalog import ModelCatalog
from servesize.db.connection import create_db_engine, make_sessionmaker
from servesize.settings import Settings, get_settings

DESCRIPTION = """\
Capacity planning for LLM inference serving: for a model architecture, a hardware profile, an
engine configuration and a traffic spec, servesize answers what fits in memory, how fast each
step runs, what latency users see under load, and the cheapest deployment that meets an SLO.

Every error is an RFC 9457 problem (`application/problem+json`). Writes need an API key
(`Authorization: Bearer <key>`) with the right scope.
"""


def rate_limits(settings: Settings, counters: CounterStore | None = None) -> RateLimits:
    """The app's limits from ``RATE_LIMIT_PER_MINUTE``, ``AUTH_FAILURES_PER_MINUTE`` and
    ``TRUSTED_PROXIES``; counted in ``counters`` (shared by the API processes) when given."""
    requests = settings.rate_limit_per_minute
    failures = settings.auth_failures_per_minute

    def limiter(limit: int, policy: str) -> RateLimiter:
        if counters is None:
            return RateLimiter(limit, policy=policy)
        return SharedRateLimiter(limit, counters, policy=policy)

    return RateLimits(
        requests=limiter(requests, REQUESTS_POLICY) if requests else None,
        auth_failures=limiter(failures, AUTH_FAILURES_POLICY) if failures else None,
        trusted_proxies=parse_networks(settings.trusted_proxies),
    )


def server_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` (``servesize serve``).

    - no ``Server`` header (``server_header``): the server does not advertise itself;
    - no proxy-header rewriting (``proxy_headers``): uvicorn would otherwise believe
      ``X-Forwarded-For`` from 127.0.0.1 and let any local client pick its rate-limit address;
      ``TRUSTED_PROXIES`` decides instead (:mod:`servesize.api.ratelimit`);
    - JSON logs for uvicorn's loggers (``log_config``); its access log is off, since
      ``servesize.access`` writes one line per request with the request id.
    """
    return {
        "server_header": False,
        "proxy_headers": False,
        "access_log": False,
        "log_config": logging_config(settings.log_level),
        "log_level": settings.log_level.lower(),
    }


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app. ``uvicorn --factory servesize.api.app:create_app`` reads the environment
    (``servesize serve --workers N`` starts N processes so); tests pass their own settings.
    The database pool and the shared state stores are created here, not at import time."""
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
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        jobs = job_executor(app.state.sessionmaker, settings)
        if isinstance(jobs, CeleryJobExecutor):  # jobs left by a stopped process re-attach
            jobs.prepare = partial(prepare_stored, app.state.lookups)
        await run_in_threadpool(jobs.fail_unfinished)
        jobs.start_heartbeat()
        app.state.jobs = jobs
        try:
            yield
        finally:
            app.state.jobs = None
            await run_in_threadpool(jobs.shutdown)
            if stores is not None:
                stores.close()
            app.state.metrics.process_stopped()
            db_engine.dispose()

    app = FastAPI(
        title="servesize",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        dependencies=[Depends(refuse_nul_parameters)],
        docs_url=None,  # served from the package's own assets by routes.page
        redoc_url=None,
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
    stores = shared_stores(settings, app.state.sessionmaker)
    app.state.sizing_cache = SizingCache(
        metrics=app.state.metrics,
        shared=stores.answers if stores else None,
        ttl_s=settings.sizing_cache_ttl_s,
    )
    install_error_handlers(app)

    app.include_router(health.router)
    # Each router carries its full "/v1/..." prefix so route templates stay exact in metrics.
    for module in (
        keys,
        models,
        hardware,
        recalibration,
        memory,
        performance,
        queueing,
        simulate,
        slo,
        sizing,
        plans,
        accuracy,
        jobs,
        traces,
        job_exports,
    ):
        app.include_router(module.router)
    install_openapi(app)
    page.install_pages(app)

    app.state.rate_limits = rate_limits(settings, stores.counters if stores else None)
    app.add_middleware(BodyGuardMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(RateLimitMiddleware, limits=app.state.rate_limits)
    app.add_middleware(HtmlReportMiddleware)  # inside the request id, outside the limits
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)
    return app
