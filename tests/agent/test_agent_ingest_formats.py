"""Ingest of files written by hand to each writer's schema (tests/agent/fixtures/README.md).

No real file of these layouts is served by the public file index (tests/data/upstream/SOURCES.md,
"Not available"), so the fixtures follow the writers' code and the numbers in them were chosen;
every expected figure below is the number written into the fixture, converted by hand
(ms ÷ 1000), or worked out in the comment beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from servesize.agent.ingest import (
    IngestError,
    IngestFormat,
    from_guidellm,
    from_inference_perf,
    from_llmd_report,
    from_vllm_bench,
    gaps,
    ingest_files,
)
from servesize.schemas.measurements import LatencyStats

FIXTURES = Path(__file__).parent / "fixtures"
STATS = ("mean", "p50", "p90", "p95", "p99")


def _check(actual: LatencyStats | None, **expected: float | None) -> None:
    assert actual is not None
    got = {k: getattr(actual, k) for k in expected}
    assert got == pytest.approx(expected, rel=1e-12)


def _json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


# --------------------------------------------------------------------------------------------
# GuideLLM 0.3 (args.strategy, request_totals beside metrics, worker.backend_model)
# --------------------------------------------------------------------------------------------


def test_guidellm_03_layout() -> None:
    benchmark = ingest_files([FIXTURES / "guidellm_03_benchmarks.json"], "guidellm")
    assert benchmark.model == "Qwen/Qwen3-8B"  # worker.backend_model
    (level,) = benchmark.levels
    assert (level.mode, level.concurrency, level.rate_per_s) == ("closed_loop", 1, None)
    assert (level.requests, level.completed, level.failed, level.timed_out) == (41, 40, 0, 1)
    assert level.duration_s == 20.0
    assert level.throughput_requests_per_s == 2.0  # 40 / 20
    assert level.throughput_output_tokens_per_s == 256.0  # 5120 / 20
    assert level.throughput_input_tokens_per_s == 512.0  # 10240 / 20
    assert level.throughput_total_tokens_per_s == 768.0  # 512 + 256
    assert (level.mean_input_tokens, level.mean_output_tokens) == (256.0, 128.0)
    # 0.3 percentiles have no p50: it comes from "median"; ms → s
    _check(level.ttft_s, mean=0.025, p50=0.024, p90=0.030, p95=0.032, p99=0.040)
    _check(level.ttft_s, std=0.003, min=0.020, max=0.042)
    # inter_token_latency_ms is our TPOT (time_per_output_token_ms, 5.2 ms, is not)
    _check(level.tpot_s, mean=0.005, p50=0.0049, p90=0.0055, p95=0.0058, p99=0.0065)
    assert level.itl_s is None
    _check(level.e2e_s, mean=0.5, p50=0.49, p90=0.55, p95=0.57, p99=0.62)  # already s
    assert gaps(benchmark) == ["level 0: ITL absent"]


def test_guidellm_03_without_duration_names_it() -> None:
    report = _json("guidellm_03_benchmarks.json")
    del report["benchmarks"][0]["duration"]
    with pytest.raises(IngestError, match=r"GuideLLM benchmarks\[0\].*'duration'"):
        from_guidellm([report])


# --------------------------------------------------------------------------------------------
# GuideLLM 0.8 (metadata.version 2, config.strategy, metrics.request_totals, config.backend)
# --------------------------------------------------------------------------------------------


def test_guidellm_08_layout() -> None:
    benchmark = ingest_files([FIXTURES / "guidellm_08_benchmarks.json"], "guidellm")
    assert benchmark.model == "meta-llama/Llama-3.1-8B-Instruct"
    constant, throughput = benchmark.levels
    assert (constant.mode, constant.rate_per_s, constant.concurrency) == ("open_loop", 4.0, None)
    assert (constant.completed, constant.failed, constant.timed_out) == (198, 2, 0)
    assert constant.duration_s == 50.0
    assert constant.throughput_requests_per_s == pytest.approx(3.96)  # 198 / 50
    assert constant.throughput_output_tokens_per_s == pytest.approx(506.88)  # 25344 / 50
    assert constant.throughput_input_tokens_per_s == pytest.approx(2027.52)  # 101376 / 50
    assert constant.mean_input_tokens == pytest.approx(512.0)  # 101376 / 198
    # percentiles.p50 present from 0.4 on; time_per_output_token_ms (99 ms) is not read
    _check(constant.ttft_s, mean=0.060, p50=0.058, p90=0.080, p95=0.090, p99=0.120)
    _check(constant.tpot_s, mean=0.008, p50=0.0079, p90=0.0088, p95=0.0092, p99=0.0105)
    _check(constant.e2e_s, mean=1.08, p50=1.07, p90=1.2, p95=1.25, p99=1.4)

    # throughput strategy with max_concurrency 32 → closed loop at 32
    assert (throughput.mode, throughput.concurrency) == ("closed_loop", 32)
    assert (throughput.requests, throughput.completed, throughput.timed_out) == (320, 300, 20)
    assert throughput.throughput_requests_per_s == 12.0  # 300 / 25
    assert throughput.throughput_output_tokens_per_s == 1536.0  # 38400 / 25
    _check(throughput.ttft_s, mean=0.4, p50=0.38, p99=0.9)
    _check(throughput.tpot_s, mean=0.02, p95=0.026)


def test_guidellm_08_without_output_tokens_names_them() -> None:
    report = _json("guidellm_08_benchmarks.json")
    del report["benchmarks"][1]["metrics"]["output_token_count"]
    with pytest.raises(IngestError, match=r"benchmarks\[1\].*'output_token_count'"):
        from_guidellm([report])


# --------------------------------------------------------------------------------------------
# vLLM benchmarks/benchmark_serving.py --save-result --metric-percentiles 95,99
# --------------------------------------------------------------------------------------------


def test_vllm_benchmark_serving_95_99_percentiles() -> None:
    benchmark = ingest_files([FIXTURES / "vllm_benchmark_serving_95_99.json"], "vllm-bench")
    assert benchmark.model == "meta-llama/Llama-3.1-8B-Instruct"
    (level,) = benchmark.levels
    assert (level.mode, level.rate_per_s, level.concurrency) == ("open_loop", 5.0, None)
    # no "failed" key in these files: num_prompts 300 − completed 297
    assert (level.requests, level.completed, level.failed) == (300, 297, 3)
    assert level.duration_s == 60.0
    assert level.throughput_requests_per_s == 4.95  # 297 / 60
    assert level.throughput_output_tokens_per_s == 633.6  # 38016 / 60
    assert level.throughput_total_tokens_per_s == 3168.0  # (152064 + 38016) / 60
    assert level.throughput_input_tokens_per_s == pytest.approx(2534.4)  # 152064 / 60
    assert level.mean_input_tokens == pytest.approx(512.0)  # 152064 / 297
    assert level.mean_output_tokens == pytest.approx(128.0)  # 38016 / 297
    assert level.goodput_requests_per_s is None  # "request_goodput:" null without --goodput
    _check(level.ttft_s, mean=0.060, p50=0.055, p95=0.085, p99=0.110, std=0.012)
    _check(level.tpot_s, mean=0.009, p50=0.0088, p95=0.0102, p99=0.0115)
    _check(level.itl_s, mean=0.0091, p50=0.0085, p95=0.014, p99=0.025)
    for stats in (level.ttft_s, level.tpot_s, level.itl_s):
        assert stats is not None
        assert stats.absent == ["p90"]  # not among --metric-percentiles: never guessed
    assert level.e2e_s is None  # e2el not among the default --percentile-metrics
    lines = gaps(benchmark)
    assert "level 0: E2E absent" in lines
    assert any(
        line.startswith("level 0: TTFT p90 absent") and "--metric-percentiles 50,90,95,99" in line
        for line in lines
    )


def test_vllm_benchmark_serving_without_completed_names_it() -> None:
    record = _json("vllm_benchmark_serving_95_99.json")
    del record["completed"]
    with pytest.raises(IngestError, match=r"vllm-bench result 0: .*'completed'"):
        from_vllm_bench([record])


# --------------------------------------------------------------------------------------------
# inference-perf stage_<n>_lifecycle_metrics.json
# --------------------------------------------------------------------------------------------


def test_inference_perf_stage_report() -> None:
    path = FIXTURES / "inference_perf_stage_0_lifecycle_metrics.json"
    with pytest.raises(IngestError, match="--model"):
        ingest_files([path], "inference-perf")
    benchmark = ingest_files([path], "inference-perf", model="Qwen/Qwen3-8B")
    assert (benchmark.model, benchmark.source) == ("Qwen/Qwen3-8B", "inference-perf")
    (level,) = benchmark.levels
    assert (level.mode, level.rate_per_s, level.concurrency) == ("open_loop", 4.0, None)
    assert (level.requests, level.completed, level.failed, level.timed_out) == (162, 160, 2, 0)
    assert level.duration_s == 40.0  # benchmark_time_seconds
    assert level.throughput_requests_per_s == 4.0  # 160 / 40
    assert level.throughput_output_tokens_per_s == 400.0  # 16000 / 40
    assert level.throughput_input_tokens_per_s == 1200.0  # 48000 / 40
    assert level.throughput_total_tokens_per_s == 1600.0
    assert (level.mean_input_tokens, level.mean_output_tokens) == (300.0, 100.0)
    # seconds as written; "median" → p50
    _check(level.ttft_s, mean=0.05, p50=0.048, p90=0.07, p95=0.08, p99=0.1, min=0.03, max=0.12)
    _check(level.tpot_s, mean=0.01, p50=0.0098, p90=0.012, p95=0.013, p99=0.015)
    _check(level.itl_s, mean=0.0101, p50=0.0095, p90=0.014, p95=0.016, p99=0.022, min=0.0)
    _check(level.e2e_s, mean=1.04, p50=1.02, p90=1.2, p95=1.25, p99=1.4, max=1.5)
    assert gaps(benchmark) == []


def test_inference_perf_without_benchmark_time_uses_count_over_rate() -> None:
    report = _json("inference_perf_stage_0_lifecycle_metrics.json")
    del report["benchmark_time_seconds"]
    report["successes"]["throughput"]["requests_per_sec"] = 3.2  # → 160 / 3.2 = 50 s
    (level,) = from_inference_perf([report], model="m").levels
    assert level.duration_s == pytest.approx(50.0)


def test_inference_perf_concurrency_stage_is_closed_loop() -> None:
    report = _json("inference_perf_stage_0_lifecycle_metrics.json")
    report["load_summary"]["concurrency"] = 8  # a stage with concurrency_level
    (level,) = from_inference_perf([report], model="m").levels
    assert (level.mode, level.concurrency, level.rate_per_s) == ("closed_loop", 8, None)


def test_inference_perf_without_request_rate_names_it() -> None:
    report = _json("inference_perf_stage_0_lifecycle_metrics.json")
    del report["successes"]["throughput"]["requests_per_sec"]
    with pytest.raises(IngestError, match=r"inference-perf report 0: .*'requests_per_sec'"):
        from_inference_perf([report], model="m")


# --------------------------------------------------------------------------------------------
# llm-d Benchmark Report v0.2
# --------------------------------------------------------------------------------------------


def _llmd() -> dict[str, Any]:
    data = yaml.safe_load((FIXTURES / "llmd_benchmark_report_v0_2.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_llmd_benchmark_report_v02() -> None:
    benchmark = ingest_files([FIXTURES / "llmd_benchmark_report_v0_2.yaml"], "llm-d")
    assert (benchmark.model, benchmark.source) == ("Qwen/Qwen3-32B", "llm-d")
    (level,) = benchmark.levels
    assert (level.mode, level.concurrency, level.rate_per_s) == ("closed_loop", 16, None)
    # total 640 = 630 completed + 4 failures + 6 incomplete
    assert (level.requests, level.completed, level.failed, level.timed_out) == (640, 630, 4, 6)
    assert level.duration_s == 80.0  # PT1M20S
    assert level.throughput_requests_per_s == 7.875  # 630 / 80
    assert level.throughput_output_tokens_per_s == 2016.0  # 630 × 256 / 80
    assert level.throughput_input_tokens_per_s == 8064.0  # 630 × 1024 / 80
    assert level.throughput_total_tokens_per_s == 10080.0
    assert (level.mean_input_tokens, level.mean_output_tokens) == (1024.0, 256.0)
    # units ms → s, ms/token → s, s/token and s as written
    _check(level.ttft_s, mean=0.18, p50=0.17, p90=0.25, p95=0.29, p99=0.4)
    _check(level.ttft_s, std=0.04, min=0.09, max=0.52)
    _check(level.tpot_s, mean=0.0075, p50=0.0074, p90=0.0082, p95=0.0086, p99=0.0098)
    _check(level.itl_s, mean=0.0076, p50=0.0071, p90=0.0093, p95=0.011, p99=0.019)
    _check(level.e2e_s, mean=2.1, p50=2.05, p90=2.5, p95=2.7, p99=3.1)
    assert gaps(benchmark) == []


def test_llmd_rate_load_is_open_loop() -> None:
    report = _llmd()
    load = report["scenario"]["load"]["standardized"]
    load["concurrency"], load["rate_qps"] = float("inf"), 10.0
    (level,) = from_llmd_report([report]).levels
    assert (level.mode, level.rate_per_s, level.concurrency) == ("open_loop", 10.0, None)


def test_llmd_without_request_total_names_it() -> None:
    report = _llmd()
    del report["results"]["request_performance"]["aggregate"]["requests"]["total"]
    with pytest.raises(IngestError, match=r"llm-d benchmark report 0: .*'total'"):
        from_llmd_report([report])


# --------------------------------------------------------------------------------------------
# Every fixture is read through the same file path as the CLI, JSON and YAML alike
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("guidellm_03_benchmarks.json", "guidellm"),
        ("guidellm_08_benchmarks.json", "guidellm"),
        ("vllm_benchmark_serving_95_99.json", "vllm-bench"),
        ("inference_perf_stage_0_lifecycle_metrics.json", "inference-perf"),
    ],
)
def test_json_fixture_read_as_yaml_gives_the_same_levels(
    tmp_path: Path, name: str, fmt: IngestFormat
) -> None:
    """GuideLLM writes ``benchmarks.yaml`` with the same model as its JSON; the other tools'
    files are JSON only, but YAML is a superset of JSON, so one reader covers both."""
    data = _json(name)
    as_yaml = tmp_path / (Path(name).stem + ".yaml")
    as_yaml.write_text(yaml.safe_dump(data))
    from_json = ingest_files([FIXTURES / name], fmt, model="m")
    from_yaml = ingest_files([as_yaml], fmt, model="m")
    assert from_yaml.levels == from_json.levels
