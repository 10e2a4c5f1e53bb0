"""The built wheel is self-contained: installed outside the repository it migrates a database,
lists the catalogue and answers ``/v1/memory``, with migrations and models read from inside it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import httpx2
import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "servesize"
# Environment variables passed through to the installed commands; everything else (PYTHONPATH,
# DATABASE_URL, MODELS_DIR, ...) is left out so that nothing points back into the repository.
PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SERVER_STACK = {"fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "prometheus-client"}


@dataclass(frozen=True)
class Installed:
    """A wheel installed with ``pip install --target``: its file, its directory and an environment
    whose only import path into servesize is that directory."""

    wheel: Path
    target: Path
    env: dict[str, str]
    cwd: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.target / "bin" / args[0]), *args[1:]],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


def _build_isolation_flags() -> list[str]:
    """``--no-build-isolation`` when this interpreter has the build backend pyproject.toml asks for
    (the locked ``make install`` environment does), else pip fetches it into an isolated build."""
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    for spec in map(Requirement, requires):
        try:
            if version(spec.name) not in spec.specifier:
                return []
        except PackageNotFoundError:
            return []
    return ["--no-build-isolation"]


def _build_and_install(root: Path) -> tuple[Path, Path]:
    """Build the wheel under ``root`` and ``pip install --target`` it; returns (wheel, target)."""
    # Build from a copy, so the build leaves no build/ or egg-info in the working tree.
    source = root / "source"
    source.mkdir()
    shutil.copy2(REPO / "pyproject.toml", source)
    shutil.copy2(REPO / "README.md", source)
    shutil.copytree(PACKAGE, source / "servesize", ignore=shutil.ignore_patterns("__pycache__"))
    dist = root / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", *_build_isolation_flags(), "-w", str(dist), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = dist.glob("servesize-*.whl")
    target = root / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True,
        timeout=600,
    )
    return wheel, target


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[Path, Path]:
    """One wheel and one installation a run: pytest-xdist workers share the run's temporary
    directory, and the first to take the lock builds while the others wait, then read it."""
    if worker_id == "master":
        return _build_and_install(tmp_path_factory.mktemp("wheel"))
    shared = tmp_path_factory.getbasetemp().parent / "servesize-wheel"
    shared.mkdir(exist_ok=True)
    done = shared / "done.json"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            wheel, target = _build_and_install(shared)
            done.write_text(json.dumps([str(wheel), str(target)]))
    wheel_name, target_name = json.loads(done.read_text())
    return Path(wheel_name), Path(target_name)


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Installed:
    wheel, target = built
    workdir = tmp_path_factory.mktemp("work")  # this process's own database and home
    env = {name: os.environ[name] for name in PASSED_THROUGH if name in os.environ}
    env |= {
        "HOME": str(workdir),
        "PYTHONPATH": str(target),
        "DATABASE_URL": f"sqlite:///{workdir / 'servesize.db'}",
        "COLUMNS": "200",
    }
    return Installed(wheel=wheel, target=target, env=env, cwd=workdir)


def _names_under(folder: Path, pattern: str) -> set[str]:
    return {path.relative_to(REPO).as_posix() for path in folder.glob(pattern)}


def test_the_wheel_carries_migrations_and_the_catalogue(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    migrations = _names_under(PACKAGE / "migrations", "versions/*.py")
    models = _names_under(PACKAGE / "data" / "models", "*.json")
    assert migrations
    assert len(models) >= 28
    assert migrations <= names
    assert models <= names
    assert {
        "servesize/py.typed",
        "servesize/migrations/env.py",
        "servesize/migrations/script.py.mako",
        "servesize/data/gpus.json",
        "servesize/data/prediction_intervals.json",
    } <= names
    assert _names_under(PACKAGE / "data" / "h100", "*.csv") <= names
    # The planner page, its script and styles, and every vendored build with its licence.
    static = _names_under(PACKAGE / "api" / "static", "**/*")
    static = {name for name in static if (REPO / name).is_file()}
    assert "servesize/api/static/vendor/chart.umd.min.js" in static
    assert "servesize/api/static/vendor/redoc.LICENSE" in static
    assert static <= names
    dist_info = "-".join(installed.wheel.name.split("-")[:2]) + ".dist-info"
    assert {name.split("/")[0] for name in names} == {"servesize", dist_info}


def test_the_base_requirements_leave_out_the_server_stack(installed: Installed) -> None:
    """``pip install servesize[agent]`` on a GPU host brings no FastAPI, SQLAlchemy or Alembic."""
    with zipfile.ZipFile(installed.wheel) as wheel:
        (metadata_name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]

    def names(extra: str | None) -> set[str]:
        return {
            r.name.lower()
            for r in requirements
            if (r.marker is None and extra is None)
            or (r.marker is not None and extra is not None and r.marker.evaluate({"extra": extra}))
        }

    assert {"server", "postgres", "hub", "agent", "cuda", "dev"} <= set(
        metadata.get_all("Provides-Extra") or []
    )
    assert names(None).isdisjoint(SERVER_STACK | {"psycopg", "huggingface-hub", "httpx2"})
    assert names("agent").isdisjoint(SERVER_STACK | {"psycopg", "huggingface-hub"})
    assert "httpx2" in names("agent")
    assert names("server") >= SERVER_STACK
    assert "psycopg" in names("postgres")
    assert "huggingface-hub" in names("hub")
    assert {"torch", "nvidia-ml-py"} <= names("cuda")


def test_the_installed_package_is_the_wheel(installed: Installed) -> None:
    probe = "import servesize, servesize.migrations; print(servesize.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env=installed.env,
        cwd=installed.cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert Path(result.stdout.strip()).is_relative_to(installed.target)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``servesize serve --no-migrate`` from the wheel, over a database migrated beforehand;
    started once for the tests that only read from it."""
    tmp_path = tmp_path_factory.mktemp("server")
    upgraded = installed.run("servesize", "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "(at head)" in upgraded.stdout
    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [str(installed.target / "bin" / "servesize"), "serve", "--no-migrate", "--port", str(port)],
        env=installed.env,
        cwd=installed.cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        # Poll until the server answers; the bound only stops a server that never comes up.
        for _ in range(600):
            if process.poll() is not None:
                pytest.fail(f"the server exited: {(tmp_path / 'server.log').read_text()}")
            try:
                if httpx2.get(f"{base_url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("the server never became ready")
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def test_the_planner_page_and_docs_from_the_wheel(server: str) -> None:
    page = httpx2.get(f"{server}/", timeout=60)
    assert page.status_code == 200
    assert '<form id="planner"' in page.text
    for asset in ("/static/planner.js", "/static/vendor/swagger-ui-bundle.js"):
        assert httpx2.get(f"{server}{asset}", timeout=60).status_code == 200, asset
    docs = httpx2.get(f"{server}/docs", timeout=60).text
    assert "/static/vendor/swagger-ui.css" in docs
    assert "cdn.jsdelivr.net" not in docs


def test_models_list_from_the_wheel(installed: Installed) -> None:
    listed = installed.run("servesize", "models", "list")
    assert listed.returncode == 0, listed.stderr
    for path in (PACKAGE / "data" / "models").glob("*.json"):
        assert path.stem.replace("--", "/", 1) in listed.stdout


def test_memory_request_against_the_wheel(server: str) -> None:
    payload = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"}
    response = httpx2.post(f"{server}/v1/memory", json=payload, timeout=60)
    assert response.status_code == 200, response.text
    body = json.loads(response.text)
    assert body["fits"] is True
    # 2 (K, V) · 32 layers · 8 KV heads · 128 · 2 B
    assert body["kv_bytes_per_token_per_gpu"] == 131_072
