"""``--json`` and ``--csv`` on ``perf``, ``simulate``, ``size`` and ``models list``: the JSON is
the REST answer for the same inputs (parsed with its schema and compared with ``/v1/...``
through the test client), the CSV has one row per plan, run or model with figures worked out
independently, stdout holds nothing else, and piped tables keep ids whole."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from typer.testing import CliRunner

from servesize.cli import app
from servesize.schemas.base import Page
from servesize.schemas.models import ModelListItem
from servesize.schemas.performance import PerformanceResponse
from servesize.schemas.simulate import SimulateResponse
from servesize.schemas.sizing import SizingResponse
from servesize.settings import get_settings

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
GPU = "h100-sxm"
MODELS_DIR = Path(__file__).resolve().parents[1] / "servesize" / "data" / "models"


def _invoke(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _cells(line: str) -> list[str]:
    """A table row's cells, stripped."""
    return [c.strip() for c in line.split("│")[1:-1]]


def _float(cell: str) -> float | None:
    return float(cell) if cell else None


# perf ----------------------------------------------------------------------------------------

PERF = ["perf", "--model", MODEL, "--gpu", GPU, "--concurrency", "8"]
PERF_LENGTHS = ["--input-tokens", "512", "--output-tokens", "64"]
PERF_BODY = {
    "model": MODEL,
    "hardware": GPU,
    "workload": {"concurrency": 8, "input_tokens": 512, "output_tokens": 64},
}


def test_perf_json_is_the_rest_answer(client: TestClient) -> None:
    result = _invoke(*PERF, *PERF_LENGTHS, "--json")
    answer = PerformanceResponse.model_validate_json(result.stdout)
    rest = client.post("/v1/performance", json=PERF_BODY)
    assert rest.status_code == 200, rest.text
    assert answer.model_dump(mode="json") == rest.json()
    # TPOT = (E2E − TTFT)/(N − 1) with N = 64 output tokens.
    assert answer.e2e_s == pytest.approx(answer.ttft_s + 63 * answer.tpot_s, rel=1e-12)
    assert answer.ttft_s_interval is not None
    # The table prints the same estimate: TTFT to 0.1 ms, TPOT to 0.01 ms.
    table = runner.invoke(app, [*PERF, *PERF_LENGTHS]).output
    cells = {c[0]: c[1] for line in table.splitlines() if len(c := _cells(line)) == 2 and c[0]}
    assert cells["TTFT"] == f"{answer.ttft_s * 1e3:.1f} ms"
    assert cells["TPOT"] == f"{answer.tpot_s * 1e3:.2f} ms"


def test_perf_csv_is_one_row_of_the_answer() -> None:
    answer = PerformanceResponse.model_validate_json(_invoke(*PERF, *PERF_LENGTHS, "--json").stdout)
    (row,) = _csv(_invoke(*PERF, *PERF_LENGTHS, "--csv").stdout)
    assert row["model"] == MODEL
    assert (row["concurrency"], row["input_tokens"], row["output_tokens"]) == ("8", "512", "64")
    for name in ("ttft_s", "tpot_s", "e2e_s", "throughput_output_tokens_per_s"):
        assert float(row[name]) == getattr(answer, name), name
    low, high = float(row["ttft_s_low"]), float(row["ttft_s_high"])
    assert low < float(row["ttft_s"]) < high
    assert int(row["weights_bytes_per_gpu"]) == answer.weights_bytes_per_gpu
    assert row["decode_bound"] == answer.bound.decode


def test_perf_refuses_a_request_over_max_model_len() -> None:
    result = _invoke(*PERF, "--max-model-len", "1024", "--json", code=2)
    assert result.stdout == ""
    # 1024 + 256 default output tokens.
    assert "1024 + 256 = 1280 tokens exceeds max_model_len" in result.output


# simulate ------------------------------------------------------------------------------------

SIMULATE = ["simulate", "--model", MODEL, "--gpu", GPU, "--seed", "3"]
TRACE_ROWS = [(250 * k, 256 + 16 * (k % 3), 8 + k % 5) for k in range(40)]


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": {p}, "output_length": {n}}}\n'
            for t, p, n in TRACE_ROWS
        )
    )
    return path


def _simulate_case(mode: str, tmp_path: Path) -> tuple[list[str], dict[str, Any], int]:
    """CLI arguments, the REST body of the same run, and the requests measured (the first
    tenth are warm-up)."""
    lengths = {"input_tokens": 256, "output_tokens": 16}
    flags = ["--input-tokens", "256", "--output-tokens", "16", "--num-requests", "100"]
    if mode == "rate":
        traffic = {"arrival": {"process": "poisson", "rate_per_s": 4}, "num_requests": 100}
        return [*flags, "--rate", "4"], traffic | lengths | {"warmup_requests": 10}, 90
    if mode == "concurrency":
        traffic = {"mode": "closed_loop", "concurrency": 4, "num_requests": 100}
        return [*flags, "--concurrency", "4"], traffic | lengths | {"warmup_requests": 10}, 90
    trace = _trace(tmp_path)
    spec = {"format": "jsonl", "file": trace.read_text()}
    return ["--trace", str(trace)], {"trace": spec, "warmup_requests": 4}, 36


@pytest.mark.parametrize("mode", ["rate", "concurrency", "trace"])
def test_simulate_json_is_the_rest_answer(client: TestClient, tmp_path: Path, mode: str) -> None:
    args, traffic, measured = _simulate_case(mode, tmp_path)
    result = _invoke(*SIMULATE, *args, "--json")
    answer = SimulateResponse.model_validate_json(result.stdout)
    body = {"model": MODEL, "hardware": GPU, "traffic": traffic | {"seed": 3}}
    rest = client.post("/v1/simulate", json=body)
    assert rest.status_code == 200, rest.text
    assert answer.model_dump(mode="json") == rest.json()
    assert answer.stable
    assert (answer.measured, answer.completed) == (measured, measured)
    assert "scheduler vllm_v1" in result.stderr  # messages go to stderr


def test_simulate_table_and_csv_agree_with_the_json(tmp_path: Path) -> None:
    args, _, measured = _simulate_case("rate", tmp_path)
    answer = SimulateResponse.model_validate_json(_invoke(*SIMULATE, *args, "--json").stdout)
    assert answer.ttft_s is not None
    assert answer.e2e_s is not None
    table = runner.invoke(app, [*SIMULATE, *args], env={"COLUMNS": "200"}).output
    assert f"completed {measured}/{measured}" in table
    ttft = next(c for line in table.splitlines() if (c := _cells(line)) and c[0] == "TTFT")
    stats = ("mean", "p50", "p95", "p99")
    assert ttft[1:] == [f"{getattr(answer.ttft_s, stat) * 1e3:,.1f} ms" for stat in stats]
    (row,) = _csv(_invoke(*SIMULATE, *args, "--csv").stdout)
    assert int(row["measured"]) == measured
    assert row["stable"] == "true"
    assert float(row["ttft_p50_s"]) == answer.ttft_s.p50
    assert float(row["e2e_p99_s"]) == answer.e2e_s.p99
    assert int(row["kv_blocks"]) == answer.engine_config.kv_blocks


def test_simulate_closed_loop_warning_is_kept_off_stdout() -> None:
    small = ["--concurrency", "2", "--num-requests", "20", "--output-tokens", "8"]
    result = _invoke(*SIMULATE, *small, "--json")
    assert json.loads(result.stdout)["mode"] == "closed_loop"
    assert "closed loop" in result.stderr.lower()


# size ----------------------------------------------------------------------------------------

SIZE = [
    "size",
    "--model",
    MODEL,
    "--rate",
    "8",
    "--slo",
    "ttft_p95=2s,tpot_p95=100ms",
    "--gpu",
    "a100-sxm-80gb",
    "--price",
    "a100-sxm-80gb=1",
    "--input-tokens",
    "512",
    "--output-tokens",
    "128",
    "--tp",
    "1",
    "--tp",
    "2",
    "--verify-top",
    "1",
]
SIZE_BODY = {
    "model": MODEL,
    "traffic": {"rate_per_s": 8, "input_tokens": 512, "output_tokens": 128},
    "slo": {"ttft_s": {"p95": 2.0}, "tpot_s": {"p95": 0.1}},
    "candidates": {"hardware": ["a100-sxm-80gb"], "tensor_parallel": [1, 2], "engines": ["vllm"]},
    "prices": {"a100-sxm-80gb": 1.0},
    "verify_top": 1,
}
VOLATILE = {"elapsed_s"}


@cache
def _size_json() -> str:
    """``SIZE --json``, run once: the CLI reads no database, so the answer is the same for every
    backend's REST comparison and for the CSV check."""
    stdout: str = _invoke(*SIZE, "--json").stdout
    return stdout


def test_size_json_is_the_rest_answer(client: TestClient) -> None:
    answer = SizingResponse.model_validate_json(_size_json())
    rest = client.post("/v1/sizing", json=SIZE_BODY)
    assert rest.status_code == 200, rest.text
    expected = {k: v for k, v in rest.json().items() if k not in VOLATILE}
    assert answer.model_dump(mode="json", exclude=VOLATILE) == expected
    assert answer.plans
    # 1 GPU × TP (1, 2) × the default 2 token budgets × 2 KV-cache dtypes.
    assert answer.candidates_evaluated == 8
    for plan in answer.plans:
        per_replica = math.prod(
            int(plan.parallelism[k])
            for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
        )
        assert plan.gpus_per_replica == per_replica
        assert plan.total_gpus == plan.replicas * per_replica
        assert plan.cost_per_hour == pytest.approx(plan.total_gpus * 1.0)


def test_size_csv_has_a_row_per_plan_and_per_rejected_candidate() -> None:
    answer = SizingResponse.model_validate_json(_size_json())
    result = _invoke(*SIZE, "--csv")
    rows = _csv(result.stdout)
    ranked = [r for r in rows if r["status"] == "ranked"]
    rejected = [r for r in rows if r["status"] == "rejected"]
    assert len(ranked) == len(answer.plans)
    assert len(rejected) == len(answer.rejected)
    assert len(rows) == len(ranked) + len(rejected)
    assert [int(r["rank"]) for r in ranked] == list(range(1, len(ranked) + 1))
    for row in ranked:
        tp, pp, dp = (int(row[f"{k}_parallel_size"]) for k in ("tensor", "pipeline", "data"))
        assert int(row["gpus_per_replica"]) == tp * pp * dp
        assert int(row["total_gpus"]) == int(row["replicas"]) * tp * pp * dp
        # One A100 at $1/h; per million output tokens at 8 requests/s × 128 tokens.
        assert float(row["cost_per_hour_usd"]) == int(row["total_gpus"]) * 1.0
        assert float(row["cost_per_million_output_tokens_usd"]) == pytest.approx(
            float(row["cost_per_hour_usd"]) / (8 * 128 * 3600) * 1e6
        )
        assert row["candidate"].startswith(f"a100-sxm-80gb vllm TP{tp} ")
    best = answer.plans[0]
    predicted = best.simulation or best.tier_a
    assert predicted is not None
    assert _float(ranked[0]["ttft_p95_s"]) == predicted.ttft_p95_s
    assert ranked[0]["predicted_by"] == predicted.source
    # The table's first plan costs the same.
    table = runner.invoke(app, SIZE, env={"COLUMNS": "250"}).output
    first = next(line for line in table.splitlines() if line.startswith("│ 1 "))
    assert f"{best.cost_per_hour:,.2f}" in first


def test_size_csv_lists_rejected_candidates_with_their_reason() -> None:
    # 70B parameters in bf16 are ~141 GB: no 24 GB L4 holds them at TP1; 2 token budgets ×
    # 2 KV-cache dtypes = 4 candidates, every one rejected; exit 1 after the rows.
    args = ["size", "--model", "meta-llama/Llama-3.1-70B", "--rate", "1", "--slo", "ttft_p95=1s"]
    result = _invoke(*args, "--gpu", "l4", "--tp", "1", "--csv", code=1)
    rows = _csv(result.stdout)
    assert len(rows) == 4
    assert {r["status"] for r in rows} == {"rejected"}
    assert {r["reason"] for r in rows} == {"does-not-fit"}
    assert all(r["candidate"].startswith("l4 vllm TP1 ") and r["detail"] for r in rows)
    assert "no candidate meets the SLO" in result.stderr


def test_size_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["size", "--model", "meta-llama/Llama-3.1-70B", "--rate", "1", "--slo", "ttft_p95=1s"]
    args += ["--gpu", "l4", "--tp", "1", "--json"]
    piped = _invoke(*args, code=1)
    assert "screening candidates" not in piped.stderr
    assert json.loads(piped.stdout)["candidates_evaluated"] == 4

    def terminal(file: Any) -> Console:
        return Console(file=file, force_terminal=True, width=100)

    monkeypatch.setattr("servesize.cli.size.Console", terminal)
    tty = _invoke(*args, code=1)
    assert "screening candidates" in tty.stderr
    assert "4/4" in tty.stderr  # candidates done / total when it finished
    assert json.loads(tty.stdout)["candidates_evaluated"] == 4


# models list ---------------------------------------------------------------------------------


def _catalogue_ids() -> set[str]:
    return {p.stem.replace("--", "/", 1) for p in MODELS_DIR.glob("*.json")}


def test_models_list_json_is_the_rest_answer(client: TestClient) -> None:
    page = Page[ModelListItem].model_validate_json(_invoke("models", "list", "--json").stdout)
    ids = _catalogue_ids()
    assert page.total == len(ids) == len(page.items)
    assert {item.id for item in page.items} == ids
    rest = client.get("/v1/models", params={"limit": 500})
    assert rest.status_code == 200, rest.text
    assert [i.model_dump(mode="json") for i in page.items] == rest.json()["items"]
    llama = next(i for i in page.items if i.id == MODEL)
    assert llama.parameters_total == 8_030_261_248


def test_models_list_csv_has_a_row_per_model() -> None:
    rows = _csv(_invoke("models", "list", "--csv").stdout)
    assert len(rows) == len(_catalogue_ids())
    assert {r["id"] for r in rows} == _catalogue_ids()
    llama = next(r for r in rows if r["id"] == MODEL)
    assert (llama["num_layers"], llama["parameters_total"]) == ("32", "8030261248")
    assert "dense" in llama["tags"].split(";")


# options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["models", "list"],
        PERF,
        [*SIMULATE, "--rate", "1"],
        SIZE,
    ],
    ids=["models", "perf", "simulate", "size"],
)
def test_json_and_csv_together_is_a_usage_error(command: list[str]) -> None:
    result = _invoke(*command, "--json", "--csv", code=2)
    assert result.stdout == ""
    assert "--json and --csv cannot be combined" in result.stderr


@pytest.fixture
def long_id_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A catalogue of one model whose id (230 characters) is wider than any terminal table."""
    org, name = "a-rather-long-organisation-name", "llama-" + "x" * 192
    model_id = f"{org}/{name}"
    shutil.copy(MODELS_DIR / "meta-llama--Llama-3.1-8B.json", tmp_path / f"{org}--{name}.json")
    monkeypatch.setenv("MODELS_DIR", str(tmp_path))
    get_settings.cache_clear()
    yield model_id
    get_settings.cache_clear()


def test_piped_tables_never_shorten_a_long_id(long_id_catalogue: str) -> None:
    assert len(long_id_catalogue) == 230
    listed = runner.invoke(app, ["models", "list"], env={"COLUMNS": ""})
    assert listed.exit_code == 0, listed.output
    assert long_id_catalogue in listed.output
    assert "…" not in listed.output
    perf = runner.invoke(
        app, ["perf", "--model", long_id_catalogue, "--gpu", GPU], env={"COLUMNS": ""}
    )
    assert perf.exit_code == 0, perf.output
    assert long_id_catalogue in perf.output
