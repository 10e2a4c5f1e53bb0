"""Sweep jobs on the embedded pool (both database backends): every row is the synchronous
sizing of its combination, the cheapest fleet is the sum of each model's cheapest row, the CSV
is the table, and bad axes are 422s that point under ``/request``."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servesize.security import Scope
from tests.api.sweep_bodies import GPUS, MODELS, PRICES, SLO, TRAFFIC, small_sweep, without_timing
from tests.api.test_hardware import bearer
from tests.api.test_jobs import submit, wait_for


@pytest.fixture
def jobs_client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(job_workers=1)


def check_rows_equal_sync(client: TestClient, result: dict[str, Any]) -> None:
    """Each combination's answer is what ``POST /v1/sizing`` answers for its body, and its row
    is that answer's rank-1 plan."""
    for row, one in zip(result["rows"], result["results"], strict=True):
        sync = client.post("/v1/sizing", json=one["request"])
        assert sync.status_code == 200, sync.text
        assert without_timing(one["sizing"]) == without_timing(sync.json())
        best = sync.json()["plans"][0]
        assert row["status"] == "planned"
        assert (row["total_gpus"], row["cost_per_hour"]) == (
            best["total_gpus"],
            best["cost_per_hour"],
        )
        assert (row["binding"], row["headroom"]) == (best["binding"], best["headroom"])


def test_a_grid_sweep_is_one_sizing_per_combination(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    accepted = submit(jobs_client, key, "sweep", small_sweep())
    assert accepted.status_code == 202, accepted.text
    job = wait_for(jobs_client, key, accepted.json()["id"], {"succeeded", "failed", "cancelled"})
    assert job["state"] == "succeeded", job["error"]
    assert job["progress"] == {"done": 4, "total": 4, "eta_s": None}
    result = job["result"]
    # The grid in order: models outermost, then GPUs (engines, traffic and SLOs have one entry).
    combos = [(r["model"], r["hardware"], r["engine"]) for r in result["rows"]]
    assert combos == [(m, g, "vllm") for m in MODELS for g in GPUS]
    check_rows_equal_sync(jobs_client, result)
    for row in result["rows"]:
        # A plan's cost is its GPUs at the request's price per GPU-hour.
        assert row["cost_per_hour"] == pytest.approx(row["total_gpus"] * PRICES[row["hardware"]])

    # The cheapest fleet: per model the row of least cost per hour, summed.
    (fleet,) = result["summary"]["fleets"]
    by_model: dict[str, list[dict[str, Any]]] = {}
    for row in result["rows"]:
        by_model.setdefault(row["model"], []).append(row)
    cheapest = {m: min(rows, key=lambda r: r["cost_per_hour"]) for m, rows in by_model.items()}
    assert [p["row"] for p in fleet["picks"]] == [cheapest[m]["index"] for m in MODELS]
    assert fleet["cost_per_hour"] == pytest.approx(
        sum(r["cost_per_hour"] for r in cheapest.values())
    )
    assert fleet["total_gpus"] == sum(r["total_gpus"] for r in cheapest.values())
    assert fleet["complete"] is True
    assert result["summary"] | {"fleets": None} == {
        "combinations": 4,
        "planned": 4,
        "no_plan": 0,
        "failed": 0,
        "fleets": None,
    }

    exported = jobs_client.get(f"/v1/jobs/{job['id']}/result.csv", headers=bearer(key))
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"].startswith("text/csv")
    lines = list(csv.DictReader(io.StringIO(exported.text)))
    assert [int(line["index"]) for line in lines] == [0, 1, 2, 3]
    for line, row in zip(lines, result["rows"], strict=True):
        assert line["hardware"] == row["hardware"]
        assert float(line["cost_per_hour"]) == row["cost_per_hour"]
        assert line["reason"] == ""


def test_a_list_sweep_runs_only_its_combinations_and_names_why_none(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    impossible = {"ttft_s": {"p95": 1e-6}}
    body = small_sweep(
        slos=[SLO, impossible],
        combinations=[{"model": 1, "hardware": 0}, {"model": 1, "hardware": 0, "slo": 1}],
    )
    job_id = submit(jobs_client, key, "sweep", body).json()["id"]
    job = wait_for(jobs_client, key, job_id, {"succeeded", "failed", "cancelled"})
    assert job["state"] == "succeeded", job["error"]
    planned, none = job["result"]["rows"]
    assert (planned["model"], planned["hardware"], planned["slo"]) == (MODELS[1], GPUS[0], 0)
    assert planned["status"] == "planned"
    assert none["status"] == "no-plan"
    assert "ttft_s.p95" in none["reason"]
    assert none["total_gpus"] is None
    sync = jobs_client.post("/v1/sizing", json=job["result"]["results"][1]["request"])
    assert sync.status_code == 422
    assert job["result"]["results"][1]["problem"]["detail"] == sync.json()["detail"]
    fleets = job["result"]["summary"]["fleets"]
    assert [(f["slo"], f["complete"], f["unserved"]) for f in fleets] == [
        (0, True, []),
        (1, False, [MODELS[1]]),
    ]
    assert fleets[1]["cost_per_hour"] == 0  # nothing picked
    csv_text = jobs_client.get(f"/v1/jobs/{job_id}/result.csv", headers=bearer(key)).text
    assert "no-plan" in csv_text


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"hardware": ["l40s", "no-such-gpu"]}, "/request/hardware/1"),
        ({"candidates": {"hardware": ["l40s"]}}, "/request/candidates/hardware"),
        ({"combinations": [{"traffic": 3}]}, "/request/combinations/0/traffic"),
        ({"traffic": [TRAFFIC] * 16, "slos": [SLO] * 8}, "/request/combinations"),
        ({"slos": []}, "/request/slos"),
    ],
)
def test_bad_axes_are_422s_under_request(
    jobs_client: TestClient, create_key: Callable[..., str], change: dict[str, Any], pointer: str
) -> None:
    key = create_key(Scope.JOBS_WRITE)
    response = submit(jobs_client, key, "sweep", small_sweep(**change))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert [e["pointer"] for e in response.json()["errors"]] == [pointer]
    assert jobs_client.get("/v1/jobs", headers=bearer(key)).json()["total"] == 0


def test_the_csv_of_a_job_that_is_not_a_finished_sweep_is_a_409(
    jobs_client: TestClient, create_key: Callable[..., str]
) -> None:
    from tests.api.test_jobs import SIMULATE

    key = create_key(Scope.JOBS_WRITE)
    job_id = submit(jobs_client, key, "simulate", SIMULATE).json()["id"]
    refused = jobs_client.get(f"/v1/jobs/{job_id}/result.csv", headers=bearer(key))
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    other = create_key(Scope.JOBS_WRITE, name="other")
    assert (
        jobs_client.get(f"/v1/jobs/{job_id}/result.csv", headers=bearer(other)).status_code == 403
    )


def test_the_readme_sweep_is_4_models_by_6_gpus_by_3_forecasts() -> None:
    import json
    import re
    from pathlib import Path

    from servesize.catalog import ModelCatalog
    from servesize.core.hardware import datasheet_spec
    from servesize.db.seed import datasheet_entries
    from servesize.schemas.sweep import SweepRequest
    from servesize.settings import Settings

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (match,) = re.findall(r"-d '(\{\"kind\": \"sweep\".*?\}\})'", readme, flags=re.S)
    body = SweepRequest.model_validate(json.loads(match)["request"])
    assert (len(body.models), len(body.hardware), len(body.traffic), len(body.slos)) == (4, 6, 3, 1)
    known_gpus = {datasheet_spec(e).id for e in datasheet_entries()}
    assert set(body.hardware) <= known_gpus
    catalog = ModelCatalog(Settings().models_dir)
    assert all(isinstance(m, str) and m in catalog for m in body.models)
