"""A client generated from the OpenAPI document (openapi-python-client) works against the
running service: an anonymous read, a computation, an authenticated write, and a problem
parsed as the documented ``Problem`` model."""

from __future__ import annotations

import importlib
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import uvicorn

from servesize.api.app import create_app
from servesize.security import Scope
from servesize.settings import Settings

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
PACKAGE = "servesize_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Generate the client once per run, from the document the app serves."""
    if not GENERATOR.exists():
        pytest.fail(f"{GENERATOR} is missing: install the dev extra", pytrace=False)
    root = tmp_path_factory.mktemp("client")
    spec = create_app(Settings(database_url=f"sqlite:///{root / 'unused.db'}")).openapi()
    (root / "openapi.json").write_text(json.dumps(spec))
    result = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(root / "openapi.json"),
            "--meta",
            "none",
            "--output-path",
            str(root / PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Every operation was generated: no warnings about parts of the document it could not use.
    assert "Warning" not in result.stdout, result.stdout
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def server_url(database_url: str) -> Iterator[str]:
    """The app under uvicorn on a free port, in a thread."""
    app = create_app(Settings(database_url=database_url, rate_limit_per_minute=0))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def _load(root: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    return lambda name: importlib.import_module(f"{PACKAGE}.{name}" if name else PACKAGE)


def test_a_generated_client_reads_computes_and_writes(
    generated: Path,
    server_url: str,
    create_key: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load = _load(generated, monkeypatch)
    package = load("")
    models = load("models")
    list_models = load("api.models.list_models")
    plan_memory = load("api.memory.plan_memory")
    create_api_key = load("api.keys.create_api_key")

    anonymous: Any = package.Client(base_url=server_url, raise_on_unexpected_status=True)
    admin: Any = package.AuthenticatedClient(
        base_url=server_url, token=create_key(Scope.ADMIN), raise_on_unexpected_status=True
    )
    with anonymous, admin:  # closes the connections before the server stops
        _calls(anonymous, admin, models, list_models, plan_memory, create_api_key)


def _calls(
    anonymous: Any,
    admin: Any,
    models: Any,
    list_models: Any,
    plan_memory: Any,
    create_api_key: Any,
) -> None:

    page = list_models.sync(client=anonymous, limit=500)
    assert isinstance(page, models.PageModelListItem)
    assert "meta-llama/Llama-3.1-8B" in {item.id for item in page.items}

    body = models.MemoryRequest.from_dict(
        {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"}
    )
    memory = plan_memory.sync(client=anonymous, body=body)
    assert isinstance(memory, models.MemoryResponse)
    # K and V: 2 × 32 layers × 8 KV heads × 128 dims × 2 bytes (bf16) = 131,072 bytes a token.
    assert memory.kv_bytes_per_token_per_gpu == 131_072
    assert memory.fits is True

    request = models.ApiKeyCreate.from_dict({"name": "ci-uploader", "scopes": ["profiles:write"]})
    created = create_api_key.sync(client=admin, body=request)
    assert isinstance(created, models.ApiKeyCreated)
    assert created.name == "ci-uploader"
    assert created.scopes == ["profiles:write"]
    assert created.key.startswith(f"ssk_{created.key_id}_")

    refused = create_api_key.sync_detailed(client=anonymous, body=request)
    assert refused.status_code == 401
    assert isinstance(refused.parsed, models.Problem)
    assert refused.parsed.status == 401
    assert refused.parsed.type_ == "urn:servesize:problem:unauthorized"
