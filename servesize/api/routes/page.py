"""The planner page (``/``), the API reference (``/docs``, ``/redoc``) and their assets.

Everything a browser needs is served from the package (``servesize/api/static``; the vendored
builds and their licences are listed in ``static/vendor/README.md``): no CDN, no web font, so
the pages work on a cluster with no way out. Each HTML page carries a Content-Security-Policy
that lets it load and call only this server.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
STATIC_PREFIX = "/static"
VENDOR = f"{STATIC_PREFIX}/vendor"
FAVICON = f"{STATIC_PREFIX}/favicon.svg"

PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
"""The planner page: its own script, styles and calls only (charts draw on canvases)."""
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
"""Swagger UI is started by an inline script and ReDoc injects its styles and a blob worker;
neither may fetch anything from another host."""

router = APIRouter()


def _secured(response: HTMLResponse | FileResponse, policy: str) -> HTMLResponse | FileResponse:
    response.headers["Content-Security-Policy"] = policy
    response.headers["Cache-Control"] = "no-cache"
    return response


@router.get("/", include_in_schema=False)
def planner_page() -> FileResponse:
    """The planner: one form, the JSON endpoints called from the browser, every figure drawn."""
    page = FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")
    _secured(page, PAGE_CSP)
    return page


@router.get("/docs", include_in_schema=False)
def swagger_ui() -> HTMLResponse:
    """Swagger UI on the vendored ``swagger-ui-dist`` build."""
    html = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="servesize - Swagger UI",
        swagger_js_url=f"{VENDOR}/swagger-ui-bundle.js",
        swagger_css_url=f"{VENDOR}/swagger-ui.css",
        swagger_favicon_url=FAVICON,
        swagger_ui_parameters={"validatorUrl": None},
    )
    _secured(html, DOCS_CSP)
    return html


@router.get("/redoc", include_in_schema=False)
def redoc() -> HTMLResponse:
    """ReDoc on the vendored ``redoc`` standalone build, without Google Fonts."""
    html = get_redoc_html(
        openapi_url="/openapi.json",
        title="servesize - ReDoc",
        redoc_js_url=f"{VENDOR}/redoc.standalone.js",
        redoc_favicon_url=FAVICON,
        with_google_fonts=False,
    )
    _secured(html, DOCS_CSP)
    return html


def install_pages(app: FastAPI) -> None:
    """Mount the assets and the three pages (the app is built with ``docs_url=None``)."""
    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(router)
