"""``--report FILE.html`` on ``size`` and ``simulate``: one self-contained file whose inlined
request, posted to the REST API, gives the inlined answer (the figures in a browser are
checked by tests/browser/test_reports.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from servesize.cli import app

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
DATA = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)


def _report(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    # Nothing is fetched: no element loads a URL, every script is inline.
    assert not re.search(r"""<(script|link|img)[^>]*(src|href)=""", text)
    found = DATA.findall(text)
    assert len(found) == 1
    data: dict[str, Any] = json.loads(found[0])
    return data


def test_simulate_report_holds_a_request_that_reproduces_its_answer(
    client: TestClient, tmp_path: Path
) -> None:
    path = tmp_path / "simulate.html"
    argv = ["simulate", "--model", MODEL, "--gpu", "h100-sxm", "--seed", "5", "--rate", "3"]
    argv += ["--input-tokens", "256", "--output-tokens", "16", "--num-requests", "60"]
    result = runner.invoke(app, [*argv, "--report", str(path)])
    assert result.exit_code == 0, result.output
    assert f"report: {path}" in result.output
    data = _report(path)
    assert data["kind"] == "simulate"
    arrival = data["request"]["traffic"]["arrival"]
    assert (arrival["process"], arrival["rate_per_s"]) == ("poisson", 3.0)
    rest = client.post("/v1/simulate", json=data["request"])
    assert rest.status_code == 200, rest.text
    assert rest.json() == data["response"]
    assert data["response"]["measured"] == 54  # 60 requests less the tenth of warm-up


def test_size_report_holds_a_request_that_reproduces_its_answer(
    client: TestClient, tmp_path: Path
) -> None:
    path = tmp_path / "sizing.html"
    argv = ["size", "--model", MODEL, "--rate", "8", "--slo", "ttft_p95=2s,tpot_p95=100ms"]
    argv += ["--gpu", "a100-sxm-80gb", "--tp", "1", "--tp", "2", "--verify-top", "1"]
    argv += ["--input-tokens", "512", "--output-tokens", "128", "--price", "a100-sxm-80gb=1.5"]
    result = runner.invoke(app, [*argv, "--report", str(path)])
    assert result.exit_code == 0, result.output
    data = _report(path)
    assert data["kind"] == "sizing"
    request = data["request"]
    assert request["slo"] == {"ttft_s": {"p95": 2.0}, "tpot_s": {"p95": 0.1}}
    assert request["prices"] == {"a100-sxm-80gb": 1.5}  # only the price given, not the sheet's
    rest = client.post("/v1/sizing", json=request)
    assert rest.status_code == 200, rest.text
    volatile = {"elapsed_s"}
    answer = {k: v for k, v in data["response"].items() if k not in volatile}
    assert {k: v for k, v in rest.json().items() if k not in volatile} == answer
    assert answer["plans"]
    assert all(p["cost_per_hour"] == 1.5 * p["total_gpus"] for p in answer["plans"])
    # The table is still printed: --report adds a file, it does not replace the output.
    assert "a100-sxm-80gb" in result.stdout
