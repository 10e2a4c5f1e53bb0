"""The planner page's pure JavaScript (chart tables, problem pointers, request bodies) under
``node --test``, and the bodies it builds accepted by the endpoints' own request schemas."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from servesize.schemas.memory import MemoryRequest
from servesize.schemas.simulate import SimulateRequest
from servesize.schemas.sizing import SizingRequest
from servesize.schemas.slo import SloCapacityRequest
from tests.browser.conftest import require

HERE = Path(__file__).resolve().parent
LIBRARY = HERE.parents[1] / "servesize" / "api" / "static" / "plannerlib.js"
SCHEMAS: dict[str, type[BaseModel]] = {
    "memory": MemoryRequest,
    "capacity": SloCapacityRequest,
    "simulate": SimulateRequest,
    "sizing": SizingRequest,
}


def test_plannerlib_under_node_test() -> None:
    node = require("node", "the page's JavaScript is tested with node --test")
    result = subprocess.run(
        [node, "--test", str(HERE / "plannerlib.test.js")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# fail 0" in result.stdout
    assert "# pass 14" in result.stdout


@pytest.mark.parametrize(
    "state",
    [{}, {"mode": "concurrency", "tp": "2", "kv_cache_dtype": "fp8", "disaggregation": "on"}],
    ids=["defaults", "closed-loop"],
)
def test_the_page_builds_bodies_the_endpoints_accept(state: dict[str, str]) -> None:
    node = require("node", "the page's request bodies are built by its JavaScript")
    script = (
        f"const L = require({json.dumps(str(LIBRARY))});"
        f"const s = {json.dumps(state)};"
        "process.stdout.write(JSON.stringify({...L.buildRequests(s), "
        "compare: L.compareBodies(s).map((i) => i.body)}));"
    )
    result = subprocess.run(
        [node, "-e", script], capture_output=True, text=True, timeout=120, check=True
    )
    bodies = json.loads(result.stdout)
    compared = bodies.pop("compare")
    assert set(bodies) == set(SCHEMAS)
    for kind, schema in SCHEMAS.items():
        schema.model_validate(bodies[kind])  # raises on a field the endpoint would refuse
    # The default comparison: the form's simulation on an H100 and an H200, one GPU each.
    assert [b["hardware"] for b in compared] == ["h100-sxm", "h200-sxm"]
    for body in compared:
        SimulateRequest.model_validate(body)
