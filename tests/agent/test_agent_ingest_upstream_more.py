"""Ingest of the real GuideLLM, vLLM, llm-d and inference-perf result files kept under
tests/data/upstream (repository, path and commit in SOURCES.md there).

Every expected figure is copied by hand from the file (ms ÷ 1000 where the file is in ms).
"""

from __future__ import annotations

import pytest

from servesize.agent.ingest import IngestError, gaps, ingest_files
from tests.agent.test_agent_ingest_upstream import UPSTREAM

GUIDELLM = UPSTREAM / "guidellm"
LLMD = UPSTREAM / "llm-d-benchmark"
INFERENCE_PERF = UPSTREAM / "inference-perf" / "vllm+batch_size"


@pytest.mark.parametrize("name", ["benchmarks_stripped.json", "benchmarks_stripped.yaml"])
def test_guidellm_03_json_and_yaml(name: str) -> None:
    benchmark = ingest_files([GUIDELLM / name], "guidellm", model="m/x")
    (level,) = benchmark.levels
    # args.strategy {"type_": "synchronous"}; request_totals 46 / 0 errored / 1 incomplete
    assert (level.mode, level.concurrency) == ("closed_loop", 1)
    assert (level.completed, level.failed, level.timed_out) == (46, 0, 1)
    assert level.duration_s == pytest.approx(29.997201442718506)
    assert level.throughput_requests_per_s == pytest.approx(46 / 29.997201442718506)
    assert level.throughput_output_tokens_per_s == pytest.approx(5888.0 / 29.997201442718506)
    assert level.throughput_input_tokens_per_s == pytest.approx(11827.0 / 29.997201442718506)
    assert level.ttft_s is not None
    assert level.ttft_s.mean == pytest.approx(16.792535781860348e-3)
    assert level.ttft_s.p50 == pytest.approx(16.38054847717285e-3)
    assert level.ttft_s.p99 == pytest.approx(21.281957626342773e-3)
    # GuideLLM's inter_token_latency_ms is per request (latency - TTFT) / (N - 1): TPOT
    assert level.tpot_s is not None
    assert level.tpot_s.p50 == pytest.approx(4.9241227427805505e-3)
    assert level.tpot_s.p90 == pytest.approx(4.973544849185493e-3)
    assert level.tpot_s.p99 == pytest.approx(5.258346167136365e-3)
    assert level.e2e_s is not None
    assert level.e2e_s.p90 == pytest.approx(0.6488735675811768)
    assert level.itl_s is None


def test_guidellm_08_report_from_llm_d_benchmark() -> None:
    benchmark = ingest_files([LLMD / "guidellm_report_v2.json"], "guidellm", model="m/x")
    first, second = benchmark.levels
    # config.strategy {"type_": "constant", "rate": 2.0} and 4.0; 2 successful requests each
    assert (first.mode, first.rate_per_s, second.rate_per_s) == ("open_loop", 2.0, 4.0)
    assert (first.completed, first.failed, first.timed_out) == (2, 0, 0)
    assert first.duration_s == pytest.approx(5.01964807510376)
    assert second.duration_s == pytest.approx(2.5186119079589844)
    assert first.ttft_s is not None
    assert second.ttft_s is not None
    assert first.ttft_s.p50 == pytest.approx(11.276006698608398e-3)
    assert first.ttft_s.p99 == pytest.approx(11.686325073242188e-3)
    assert second.ttft_s.p50 == pytest.approx(9.419918060302734e-3)


def test_vllm_benchmark_serving_default_percentiles() -> None:
    """May 2025 ``--save-result`` with the default percentiles: median, p95 (of the run's
    ``--metric-percentiles 95,99``) and p99, no p90 and no E2E; the gaps say how to rerun."""
    path = LLMD / "benchmark_2025-05-13_04-55-27.json"
    benchmark = ingest_files([path], "vllm-bench")
    assert benchmark.model == "meta-llama/Llama-3.1-8B-Instruct"
    (level,) = benchmark.levels
    assert (level.mode, level.rate_per_s) == ("open_loop", 3.6)
    assert (level.completed, level.failed) == (200, 0)
    assert level.duration_s == pytest.approx(57.42171942605637)
    assert level.throughput_requests_per_s == pytest.approx(3.483002633829972)
    assert level.throughput_output_tokens_per_s == pytest.approx(696.6005267659943)
    assert level.ttft_s is not None
    assert level.ttft_s.mean == pytest.approx(243.57119981985306e-3)
    assert level.ttft_s.p50 == pytest.approx(244.08852099440992e-3)
    assert level.ttft_s.p95 == pytest.approx(257.0488001947524e-3)
    assert level.ttft_s.p99 == pytest.approx(261.66544687526766e-3)
    assert level.ttft_s.std == pytest.approx(16.538860460397625e-3)
    assert level.ttft_s.p90 is None
    assert level.tpot_s is not None
    assert level.tpot_s.p99 == pytest.approx(27.33748187944843e-3)
    assert level.itl_s is not None
    assert level.itl_s.p99 == pytest.approx(216.5980374556966e-3)
    assert level.e2e_s is None
    missing = " ".join(gaps(benchmark))
    assert "TTFT p90" in missing
    assert "--percentile-metrics" in missing


def test_llmd_benchmark_report_v0_2_example() -> None:
    benchmark = ingest_files([LLMD / "br_v0_2_example.yaml"], "llm-d")
    assert benchmark.model == "Qwen/Qwen3-0.6B"
    (level,) = benchmark.levels
    # scenario.load.standardized.rate_qps 10; requests.total 500, failures 0
    assert (level.mode, level.rate_per_s) == ("open_loop", 10.0)
    assert (level.completed, level.failed) == (500, 0)
    assert level.ttft_s is not None
    assert level.ttft_s.p50 == pytest.approx(0.03622930939309299)
    assert level.ttft_s.p90 == pytest.approx(0.04262634576298297)
    assert level.ttft_s.p99 == pytest.approx(0.05029489721637218)
    assert level.ttft_s.max == pytest.approx(0.0574655020609498)
    # the example's throughput block repeats its length statistics (2262.448)
    assert level.throughput_requests_per_s == pytest.approx(2262.448)
    # time_per_output_token gives only a mean (0.0368578234128654): no percentiles
    assert level.tpot_s is not None
    assert level.tpot_s.mean == pytest.approx(0.0368578234128654)
    assert (level.tpot_s.p50, level.tpot_s.p99) == (None, None)


def test_inference_perf_stage_report() -> None:
    benchmark = ingest_files(
        [INFERENCE_PERF / "stage_0_lifecycle_metrics.json"], "inference-perf", model="m/x"
    )
    (level,) = benchmark.levels
    # load_summary.requested_rate 1.0; successes.count 60; failures.count 0
    assert (level.mode, level.rate_per_s) == ("open_loop", 1.0)
    assert (level.completed, level.failed) == (60, 0)
    assert level.throughput_requests_per_s == pytest.approx(0.996850670841712)
    assert level.throughput_output_tokens_per_s == pytest.approx(62.15363932698074)
    assert level.ttft_s is not None
    assert level.ttft_s.p50 == pytest.approx(0.032918093027547)
    assert level.ttft_s.p99 == pytest.approx(0.04251505806925707)
    assert level.tpot_s is not None
    assert level.tpot_s.p50 == pytest.approx(0.0034682437246881946)
    assert level.e2e_s is not None
    assert level.e2e_s.p50 == pytest.approx(0.4824237964930944)
    assert level.mean_input_tokens == pytest.approx(200.68333333333334)


def test_inference_perf_summary_pools_stages_and_says_so() -> None:
    with pytest.raises(IngestError, match=r"stage_<n>_lifecycle_metrics\.json"):
        ingest_files(
            [INFERENCE_PERF / "summary_lifecycle_metrics.json"], "inference-perf", model="m/x"
        )
