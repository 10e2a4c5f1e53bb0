"""Ingest of vllm bench serve, GuideLLM and AIPerf result files written from their formats.

Expected values are read off the fixtures (ms ÷ 1000) or computed by hand in comments.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servesize.agent.cli import app
from servesize.agent.ingest import (
    PERCENTILES,
    IngestError,
    from_aiperf,
    from_guidellm,
    from_vllm_bench,
    gaps,
    ingest_files,
    read_json_records,
)
from servesize.agent.upload import SavedMeasurement
from servesize.schemas.measurements import LatencyStats

FIXTURES = Path(__file__).parent / "fixtures"


def _stats(mean: float, p50: float, p90: float, p95: float, p99: float) -> LatencyStats:
    return LatencyStats(mean=mean, p50=p50, p90=p90, p95=p95, p99=p99)


def _approx(actual: LatencyStats | None, expected: LatencyStats) -> None:
    assert actual is not None
    keys = ("mean", *PERCENTILES)
    got = {k: getattr(actual, k) for k in keys}
    assert got == pytest.approx({k: getattr(expected, k) for k in keys}, rel=1e-9)


def _load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def test_vllm_bench_closed_loop_summary() -> None:
    benchmark = ingest_files([FIXTURES / "vllm_bench_concurrency4.json"], "vllm-bench")

    assert benchmark.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert benchmark.source == "vllm-bench"
    (level,) = benchmark.levels
    # request_rate "inf" with max_concurrency 4 → closed loop at 4
    assert (level.mode, level.concurrency, level.rate_per_s) == ("closed_loop", 4, None)
    assert (level.requests, level.completed, level.failed, level.timed_out) == (200, 198, 2, 0)
    assert level.duration_s == 50.0
    assert level.throughput_requests_per_s == 3.96  # 198 / 50
    assert level.throughput_output_tokens_per_s == 506.88  # 25344 / 50
    assert level.goodput_requests_per_s is None
    # median → p50; ms → s
    _approx(level.ttft_s, _stats(0.045, 0.042, 0.055, 0.061, 0.080))
    _approx(level.tpot_s, _stats(0.0075, 0.0074, 0.0079, 0.0081, 0.0086))
    _approx(level.itl_s, _stats(0.0075, 0.0072, 0.008, 0.009, 0.015))
    _approx(level.e2e_s, _stats(1.0, 0.99, 1.04, 1.06, 1.1))


def test_vllm_bench_jsonl_rates_and_detailed_lists() -> None:
    benchmark = ingest_files([FIXTURES / "vllm_bench_rates.jsonl"], "vllm-bench")

    first, second = benchmark.levels
    assert (first.mode, first.rate_per_s, first.concurrency) == ("open_loop", 1.0, None)
    assert first.goodput_requests_per_s == 0.72
    _approx(first.ttft_s, _stats(0.030, 0.029, 0.033, 0.034, 0.036))
    assert first.e2e_s is None  # e2el was not among --percentile-metrics

    # Only p99 was saved, so the --save-detailed lists are used; request 4 failed.
    assert (second.mode, second.rate_per_s) == ("open_loop", 2.0)
    assert (second.requests, second.completed, second.failed) == (4, 3, 1)
    # ttfts [0.1, 0.2, 0.3]: p90 at rank 1.8 → 0.28, p95 → 0.29, p99 → 0.298
    _approx(second.ttft_s, _stats(0.2, 0.2, 0.28, 0.29, 0.298))
    # pooled gaps sorted [.05, .05, .05, .1, .1, .15]: mean 0.5/6; p50 at rank 2.5 → 0.075;
    # p90 at 4.5 → 0.125; p95 at 4.75 → 0.1375; p99 at 4.95 → 0.1475
    _approx(second.itl_s, _stats(0.5 / 6, 0.075, 0.125, 0.1375, 0.1475))
    # TPOT (latency − ttft)/(3 − 1): 0.05, 0.1, 0.1 → mean 0.25/3, p50 0.1
    _approx(second.tpot_s, _stats(0.25 / 3, 0.1, 0.1, 0.1, 0.1))
    # E2E [0.2, 0.4, 0.5]: mean 1.1/3, p90 at rank 1.8 → 0.48
    _approx(second.e2e_s, _stats(1.1 / 3, 0.4, 0.48, 0.49, 0.498))


def test_vllm_bench_missing_percentile_is_stored_as_absent() -> None:
    record = _load("vllm_bench_concurrency4.json")
    del record["p90_ttft_ms"]
    benchmark = from_vllm_bench([record])
    ttft = benchmark.levels[0].ttft_s
    assert ttft is not None
    assert ttft.p90 is None
    assert ttft.p99 == 0.080
    (line,) = [g for g in gaps(benchmark) if "TTFT" in g]
    assert "p90 absent" in line
    assert "--metric-percentiles 50,90,95,99" in line


def test_vllm_bench_infinite_rate_without_cap_is_one_burst() -> None:
    record = _load("vllm_bench_concurrency4.json") | {"max_concurrency": None}
    (level,) = from_vllm_bench([record]).levels
    assert (level.mode, level.concurrency) == ("closed_loop", 200)  # num_prompts at once


def test_guidellm_report() -> None:
    benchmark = ingest_files([FIXTURES / "guidellm_benchmarks.json"], "guidellm")

    assert benchmark.model == "Qwen/Qwen3-32B"
    assert benchmark.source == "guidellm"
    concurrent, poisson = benchmark.levels
    assert (concurrent.mode, concurrent.concurrency) == ("closed_loop", 2)
    # successful 57, errored 1, incomplete 2 (cut off at the end of the window)
    assert (concurrent.requests, concurrent.completed) == (60, 57)
    assert (concurrent.failed, concurrent.timed_out) == (1, 2)
    assert concurrent.throughput_requests_per_s == pytest.approx(57 / 30)  # 1.9
    assert concurrent.throughput_output_tokens_per_s == pytest.approx(7296 / 30)  # 243.2
    _approx(concurrent.ttft_s, _stats(0.120, 0.110, 0.150, 0.170, 0.210))
    # inter_token_latency_ms is our TPOT; time_per_output_token_ms (12.9 ms) is not used
    _approx(concurrent.tpot_s, _stats(0.012, 0.0118, 0.013, 0.0135, 0.015))
    assert concurrent.itl_s is None
    _approx(concurrent.e2e_s, _stats(1.64, 1.6, 1.8, 1.9, 2.1))  # request_latency is seconds
    assert (poisson.mode, poisson.rate_per_s) == ("open_loop", 1.5)
    assert poisson.throughput_output_tokens_per_s == pytest.approx(7680 / 40)  # 192


def test_guidellm_unknown_strategy_is_refused() -> None:
    report = _load("guidellm_benchmarks.json")
    report["benchmarks"][0]["config"]["strategy"] = {"type_": "replay"}
    with pytest.raises(IngestError, match="replay"):
        from_guidellm([report])


def test_aiperf_export() -> None:
    benchmark = ingest_files([FIXTURES / "aiperf_profile_export_aiperf.json"], "aiperf")

    assert benchmark.model == "meta-llama/Llama-3.1-70B-Instruct"
    (level,) = benchmark.levels
    assert (level.mode, level.concurrency) == ("closed_loop", 8)
    # request_count 95 ok; error_request_count 5 = 2 server errors + 3 TimeoutError
    assert (level.requests, level.completed, level.failed, level.timed_out) == (100, 95, 2, 3)
    assert level.duration_s == 20.0
    assert level.throughput_requests_per_s == 4.75
    assert level.throughput_output_tokens_per_s == 608.0
    assert level.goodput_requests_per_s == 4.5
    _approx(level.ttft_s, _stats(0.085, 0.080, 0.110, 0.120, 0.150))
    _approx(level.tpot_s, _stats(0.0095, 0.0094, 0.010, 0.0104, 0.0115))  # inter_token_latency
    _approx(level.itl_s, _stats(0.0094, 0.0092, 0.0105, 0.011, 0.014))  # inter_chunk_latency
    _approx(level.e2e_s, _stats(1.2915, 1.28, 1.35, 1.38, 1.45))


def test_aiperf_units_are_read_per_metric() -> None:
    export = _load("aiperf_profile_export_aiperf.json")
    ns = {"unit": "ns", "avg": 85e6, "p50": 80e6, "p90": 110e6, "p95": 120e6, "p99": 150e6}
    export["time_to_first_token"] = ns
    export["input_config"]["loadgen"] = {"request_rate": 5.0, "concurrency": 8}
    (level,) = from_aiperf([export]).levels
    _approx(level.ttft_s, _stats(0.085, 0.080, 0.110, 0.120, 0.150))
    assert (level.mode, level.rate_per_s) == ("open_loop", 5.0)
    export["time_to_first_token"] = ns | {"unit": "tokens"}
    with pytest.raises(IngestError, match="not a time unit"):
        from_aiperf([export])


def test_genai_perf_flat_input_config() -> None:
    export = _load("aiperf_profile_export_aiperf.json")
    export["input_config"] = {"model": ["gpt2"], "concurrency": 16, "request_rate": None}
    benchmark = from_aiperf([export])
    assert benchmark.model == "gpt2"
    assert benchmark.levels[0].concurrency == 16


def test_model_must_be_known() -> None:
    export = _load("aiperf_profile_export_aiperf.json")
    del export["input_config"]["endpoint"]
    with pytest.raises(IngestError, match="--model"):
        from_aiperf([export])
    assert from_aiperf([export], model="my-model").model == "my-model"


def test_read_json_records_rejects_garbage(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json\n")
    with pytest.raises(IngestError, match="neither JSON nor JSON Lines"):
        read_json_records(bad)


def test_cli_ingest_saves_an_upload_file(tmp_path: Path) -> None:
    out = tmp_path / "ingested.json"
    result = CliRunner().invoke(
        app,
        ["ingest", str(FIXTURES / "aiperf_profile_export_aiperf.json"), "--format", "aiperf",
         "--gpu-name", "NVIDIA H100 80GB HBM3", "--gpu-count", "4", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    saved = SavedMeasurement.load(out)
    assert saved.payload.endpoint_benchmarks[0].source == "aiperf"
    assert saved.payload.provenance.gpu_count == 4
    assert saved.payload.provenance.device == "endpoint"


def test_cli_ingest_reports_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "empty.json"
    bad.write_text("{}")
    result = CliRunner().invoke(app, ["ingest", str(bad), "--format", "guidellm"])
    assert result.exit_code == 1
    assert "no benchmarks" in result.output


def _serve_py_record() -> dict[str, Any]:
    """The keys ``vllm/benchmarks/serve.py`` saves with the default ``--metric-percentiles 99``
    and ``--save-detailed`` (no per-request latency list); values worked by hand below."""
    return {
        "model_id": "m",
        "num_prompts": 3,
        "request_rate": 4.0,
        "max_concurrency": None,
        "duration": 2.0,
        "completed": 2,
        "failed": 1,
        "total_input_tokens": 30,
        "total_output_tokens": 6,
        "request_throughput": 1.0,
        "request_goodput": None,
        "output_throughput": 3.0,
        "total_token_throughput": 18.0,
        "mean_ttft_ms": 150.0,
        "median_ttft_ms": 150.0,
        "std_ttft_ms": 50.0,
        "p99_ttft_ms": 199.0,
        "input_lens": [10, 20, 5],
        "output_lens": [3, 3, 0],
        "ttfts": [0.1, 0.2, 0.0],
        "itls": [[0.05, 0.05], [0.1, 0.1], []],
        "generated_texts": ["abc", "def", ""],
        "errors": ["", "", "server disconnected"],
    }


def test_vllm_save_detailed_lists_fill_every_percentile() -> None:
    (level,) = from_vllm_bench([_serve_py_record()]).levels
    assert (level.requests, level.completed, level.failed) == (3, 2, 1)
    # successful TTFTs [0.1, 0.2]: p90 at rank 0.9 → 0.19; population std 0.05
    _approx(level.ttft_s, _stats(0.15, 0.15, 0.19, 0.195, 0.199))
    assert level.ttft_s is not None
    assert level.ttft_s.std == pytest.approx(0.05)
    # E2E = TTFT + Σ ITL: 0.1 + 0.1 = 0.2 and 0.2 + 0.2 = 0.4
    _approx(level.e2e_s, _stats(0.3, 0.3, 0.38, 0.39, 0.398))
    # TPOT = (E2E − TTFT)/(3 − 1): 0.05 and 0.1
    _approx(level.tpot_s, _stats(0.075, 0.075, 0.095, 0.0975, 0.0995))
    # pooled gaps [0.05, 0.05, 0.1, 0.1]: mean 0.075, p90 at rank 2.7 → 0.1
    _approx(level.itl_s, _stats(0.075, 0.075, 0.1, 0.1, 0.1))
    assert level.throughput_input_tokens_per_s == pytest.approx(30 / 2.0)
    assert level.throughput_total_tokens_per_s == 18.0
    assert level.mean_input_tokens == pytest.approx(15.0)


def test_vllm_p99_only_default_keeps_what_is_there() -> None:
    record = {k: v for k, v in _serve_py_record().items() if k not in ("ttfts", "itls")}
    benchmark = from_vllm_bench([record])
    ttft = benchmark.levels[0].ttft_s
    assert ttft is not None
    assert (ttft.mean, ttft.p50, ttft.p99, ttft.std) == pytest.approx((0.15, 0.15, 0.199, 0.05))
    assert ttft.absent == ["p90", "p95"]
    assert any(
        line.startswith("level 0: TTFT p90, p95 absent") and "--save-detailed" in line
        for line in gaps(benchmark)
    )


@pytest.mark.parametrize(
    ("fmt", "record", "field"),
    [
        (
            "vllm-bench",
            {"model_id": "m", "completed": 1, "failed": 0, "request_rate": 1.0},
            "'duration'",
        ),
        (
            "aiperf",
            {"input_config": {"loadgen": {"concurrency": 2}, "endpoint": {"model_names": ["m"]}}},
            "benchmark_duration, request_throughput, output_token_throughput missing",
        ),
        ("guidellm", {"benchmarks": [{"metrics": {}}]}, "no request_totals"),
        ("llm-d", {"version": "0.1"}, "only Benchmark Report v0.2"),
        ("inference-perf", {"load_summary": {"count": 3}, "successes": {}}, "requested_rate"),
    ],
)
def test_a_file_that_cannot_be_ingested_names_the_field(
    tmp_path: Path, fmt: Any, record: dict[str, Any], field: str
) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(record))
    with pytest.raises(IngestError, match=re.escape(field)):
        ingest_files([path], fmt, model="m")
