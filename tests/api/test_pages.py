"""The planner page and the API reference pages: served from the package, no asset from
another host, each under a same-origin Content-Security-Policy, none in the OpenAPI document."""

from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient

ASSET = re.compile(r'(?:src|href)="([^"]+)"')


def test_the_planner_page_is_served_at_the_root(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'self';")
    assert "script-src 'self';" in policy  # no inline script on the planner page
    assert "connect-src 'self'" in policy
    assets = ASSET.findall(page.text)
    assert "/static/planner.js" in assets
    assert "/static/vendor/chart.umd.min.js" in assets
    for asset in assets:
        if asset.startswith(("/static/", "?")):
            continue
        assert asset in {"/docs", "/redoc"}, asset
    for asset in (a for a in assets if a.startswith("/static/")):
        assert client.get(asset).status_code == 200, asset


def test_docs_and_redoc_load_only_vendored_assets(client: TestClient) -> None:
    for path, script in (
        ("/docs", "/static/vendor/swagger-ui-bundle.js"),
        ("/redoc", "/static/vendor/redoc.standalone.js"),
    ):
        response = client.get(path)
        assert response.status_code == 200
        assert "connect-src 'self'" in response.headers["content-security-policy"]
        assets = ASSET.findall(response.text)
        assert script in assets
        assert all(a.startswith("/static/") for a in assets), assets
        assert "fonts.googleapis.com" not in response.text
        assert client.get(script).status_code == 200


def test_the_pages_stay_out_of_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/", "/docs", "/redoc"} & set(paths)
    assert not any(p.startswith("/static") for p in paths)


def test_an_unknown_asset_is_a_404(client: TestClient) -> None:
    assert client.get("/static/vendor/nothing.js").status_code == 404
    assert client.get("/static/../app.py").status_code == 404


MEMORY = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"}
REPORT_DATA = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)


def test_format_html_turns_the_answer_into_a_self_contained_report(client: TestClient) -> None:
    answer = client.post("/v1/memory", json=MEMORY).json()
    for query, headers in (("?format=html", {}), ("", {"Accept": "text/html"})):
        report = client.post("/v1/memory" + query, json=MEMORY, headers=headers)
        assert report.status_code == 200
        assert report.headers["content-type"] == "text/html; charset=utf-8"
        assert report.headers["content-security-policy"].startswith("default-src 'none';")
        assert report.headers["x-request-id"]
        (inlined,) = REPORT_DATA.findall(report.text)
        data = json.loads(inlined)
        assert data == {"kind": "memory", "request": MEMORY, "response": answer}
        # Nothing to fetch: no src or href to anywhere, the chart library inlined.
        assert not re.findall(r'\b(?:src|href)="(?!#|\?)', report.text)
        assert "Chart.js v4.6.1" in report.text


def test_json_stays_the_default_and_a_problem_stays_a_problem(client: TestClient) -> None:
    for query, headers in (("", {"Accept": "*/*"}), ("?format=json", {"Accept": "text/html"})):
        answer = client.post("/v1/memory" + query, json=MEMORY, headers=headers)
        assert answer.headers["content-type"] == "application/json", query
    bad = {**MEMORY, "deployment": {"tensor_parallel_size": 3}}
    problem = client.post("/v1/memory?format=html", json=bad)
    assert problem.status_code == 422
    assert problem.headers["content-type"] == "application/problem+json"
    assert problem.json()["errors"][0]["pointer"] == "/deployment/tensor_parallel_size"
