"""A real server on a loopback port and a headless Chromium driven by Selenium.

Debian's ``chromium`` and ``chromium-driver`` (``make browser-deps``). Without them a browser
test is skipped on a developer's machine and fails with ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

from servesize.api.app import create_app
from servesize.db import migrate
from servesize.settings import Settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(program: str | Path, why: str) -> str:
    """The program's path; else skip, or fail under ``CI=true``."""
    found = shutil.which(str(program))
    if found is None:
        message = f"{program} is missing ({why}; `make browser-deps` installs it)"
        if in_ci():
            pytest.fail(f"CI=true requires it: {message}", pytrace=False)
        pytest.skip(message)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def live_database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A freshly migrated SQLite file (its URL) for the live server."""
    url = f"sqlite:///{tmp_path_factory.mktemp('server') / 'page.db'}"
    migrate.upgrade(url)
    return url


@pytest.fixture(scope="module")
def live_server(live_database: str) -> Iterator[str]:
    """The app under uvicorn on 127.0.0.1 over ``live_database``, one job worker."""
    app = create_app(
        Settings(
            database_url=live_database, rate_limit_per_minute=0, log_level="WARNING", job_workers=1
        )
    )
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # bounds a server that never comes up, times nothing
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium with its network events in the performance log."""
    chromium = require(CHROMIUM, "the planner page is tested in a real browser")
    driver_path = require(CHROMEDRIVER, "Selenium drives Chromium through chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,2200",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
