"""Ingest of real result files from the tools' own repositories (tests/data/upstream/SOURCES.md).

Every expected figure is copied by hand from the file (ms ÷ 1000 where the file is in ms), or
recomputed here with numpy from the per-request records of the same run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from servesize.agent.ingest import IngestError, gaps, ingest_files

UPSTREAM = Path(__file__).parent.parent / "data" / "upstream"
AIPERF_RUN1 = UPSTREAM / "aiperf" / "run1"


def test_aiperf_01_summary_json() -> None:
    benchmark = ingest_files([AIPERF_RUN1 / "profile_export_aiperf.json"], "aiperf")
    assert benchmark.model == "openai/gpt-oss-20b"
    (level,) = benchmark.levels
    assert (level.mode, level.concurrency) == ("closed_loop", 100)
    # request_count 89; error_request_count 11, all RequestCancellationError (no timeout)
    assert (level.requests, level.completed, level.failed, level.timed_out) == (100, 89, 11, 0)
    assert level.duration_s == 9.317788951
    assert level.throughput_requests_per_s == 9.551622221540914
    assert level.throughput_output_tokens_per_s == 2320.7222350404572
    assert level.throughput_input_tokens_per_s == pytest.approx(48950.0 / 9.317788951)
    assert level.mean_input_tokens == 550.0
    ttft = level.ttft_s
    assert ttft is not None
    assert (ttft.mean, ttft.p50, ttft.p90, ttft.p99) == pytest.approx(
        (2.343219436988764, 2.369317693, 3.7969311679999996, 3.8333894000399996)
    )
    assert (ttft.std, ttft.min, ttft.max) == pytest.approx(
        (1.0498164554204095, 0.464664101, 3.853857423)
    )
    assert level.tpot_s is not None
    assert level.tpot_s.mean == pytest.approx(0.027763065454471807)
    assert level.itl_s is not None
    assert level.itl_s.p99 == pytest.approx(0.14053429476)
    assert level.e2e_s is not None
    assert level.e2e_s.p50 == pytest.approx(9.097345014999999)
    assert gaps(benchmark) == []


def test_aiperf_01_per_record_jsonl_recomputed_with_numpy() -> None:
    records = [
        json.loads(line) for line in (AIPERF_RUN1 / "profile_export.jsonl").read_text().splitlines()
    ]
    ok = [r["metrics"] for r in records if not r.get("error")]
    ttft_s = np.array([m["ttft"]["value"] for m in ok]) / 1e3
    gaps_s = np.concatenate([m["inter_chunk_latency"]["value"] for m in ok]) / 1e3
    tpot_s = np.array([m["inter_token_latency"]["value"] for m in ok]) / 1e3
    start_ns = min(m["min_request_timestamp"]["value"] for m in ok)
    end_ns = max(m["max_response_timestamp"]["value"] for m in ok)

    benchmark = ingest_files([AIPERF_RUN1 / "profile_export.jsonl"], "aiperf")
    (level,) = benchmark.levels
    assert (level.completed, level.failed, level.concurrency) == (89, 11, 100)
    assert level.duration_s == pytest.approx((end_ns - start_ns) / 1e9)
    # ... which is the summary's benchmark_duration of the same run
    assert level.duration_s == pytest.approx(9.317788951, rel=1e-6)
    assert level.ttft_s is not None
    assert level.itl_s is not None
    assert level.tpot_s is not None
    assert level.ttft_s.p90 == pytest.approx(float(np.percentile(ttft_s, 90)))
    assert level.itl_s.p99 == pytest.approx(float(np.percentile(gaps_s, 99)))
    assert level.tpot_s.mean == pytest.approx(float(tpot_s.mean()))
    # AIPerf's own summary of this run agrees (it uses the same linear percentiles)
    assert level.ttft_s.p90 == pytest.approx(3.7969311679999996)
    assert level.itl_s.p99 == pytest.approx(0.14053429476)
    assert level.ttft_s.std == pytest.approx(1.0498164554204095)


def test_aiperf_01_csv_export() -> None:
    benchmark = ingest_files([AIPERF_RUN1 / "profile_export_aiperf.csv"], "aiperf")
    (level,) = benchmark.levels
    assert (level.completed, level.failed, level.duration_s) == (89, 11, 9.32)  # two decimals
    assert level.ttft_s is not None
    assert (level.ttft_s.mean, level.ttft_s.p99) == pytest.approx((2.34322, 3.83339))
    assert level.throughput_output_tokens_per_s == 2320.72


def test_aiperf_jsonl_without_its_summary_says_what_it_needs(tmp_path: Path) -> None:
    shutil.copy(AIPERF_RUN1 / "profile_export.jsonl", tmp_path)
    with pytest.raises(IngestError, match=r"keep profile_export_aiperf\.json .* beside it"):
        ingest_files([tmp_path / "profile_export.jsonl"], "aiperf")


def test_aiperf_08_phases_layout_non_streaming() -> None:
    path = UPSTREAM / "aiperf" / "audit-bare" / "profile_export_aiperf.json"
    benchmark = ingest_files([path], "aiperf")
    assert benchmark.model == "mock-model"  # input_config.models.items[0].name
    (level,) = benchmark.levels
    assert (level.mode, level.concurrency) == ("closed_loop", 4)  # phases[profiling]
    assert (level.completed, level.failed, level.duration_s) == (64, 0, 0.034502655)
    assert level.throughput_total_tokens_per_s == 2042654.398625265
    assert level.ttft_s is None
    assert level.tpot_s is None
    assert level.e2e_s is not None
    assert (level.e2e_s.p50, level.e2e_s.p99) == pytest.approx((0.0006734305, 0.01514387014))
    assert "level 0: TTFT absent" in gaps(benchmark)


@pytest.mark.parametrize("name", ["benchmarks_stripped.json", "benchmarks_stripped.yaml"])
def test_guidellm_03_layout(name: str) -> None:
    benchmark = ingest_files([UPSTREAM / "guidellm" / name], "guidellm")
    assert benchmark.model == "example_model"  # worker.backend_model
    (level,) = benchmark.levels
    assert (level.mode, level.concurrency) == ("closed_loop", 1)  # synchronous
    # request_totals {successful 46, errored 0, incomplete 1}
    assert (level.completed, level.failed, level.timed_out) == (46, 0, 1)
    assert level.duration_s == 29.997201442718506
    assert level.throughput_output_tokens_per_s == pytest.approx(5888.0 / 29.997201442718506)
    assert level.mean_input_tokens == pytest.approx(11827.0 / 46)
    ttft = level.ttft_s
    assert ttft is not None
    # p50 from "median": the 0.3 percentiles have no p50
    assert (ttft.mean, ttft.p50, ttft.p90, ttft.p99) == pytest.approx(
        (0.016792535781860348, 0.01638054847717285, 0.018505334854125977, 0.021281957626342773)
    )
    assert level.tpot_s is not None
    assert level.tpot_s.mean == pytest.approx(0.004941609043733832)
    assert level.e2e_s is not None
    assert level.e2e_s.p50 == pytest.approx(0.6424565315246582)


def test_guidellm_08_report() -> None:
    benchmark = ingest_files([UPSTREAM / "guidellm" / "guidellm_report_v2.json"], "guidellm")
    assert benchmark.model == "e2e-mock-model"
    first, second = benchmark.levels
    assert (first.mode, first.rate_per_s, second.rate_per_s) == ("open_loop", 2.0, 4.0)
    assert (first.completed, first.duration_s) == (2, 5.01964807510376)
    assert first.throughput_output_tokens_per_s == pytest.approx(16.0 / 5.01964807510376)
    assert first.ttft_s is not None
    assert first.ttft_s.mean == pytest.approx(0.011481165885925293)
    assert second.tpot_s is not None
    assert second.tpot_s.mean == pytest.approx(0.0010904414313180106)
    assert second.e2e_s is not None
    assert second.e2e_s.p99 == pytest.approx(0.019294023513793945)


def test_vllm_benchmark_serving_95_99_percentiles() -> None:
    path = UPSTREAM / "vllm" / "benchmark_2025-05-13_04-55-27.json"
    benchmark = ingest_files([path], "vllm-bench")
    assert benchmark.model == "meta-llama/Llama-3.1-8B-Instruct"
    (level,) = benchmark.levels
    assert (level.mode, level.rate_per_s) == ("open_loop", 3.6)
    # no "failed" key in 2025 files: num_prompts 200 − completed 200
    assert (level.completed, level.failed, level.duration_s) == (200, 0, 57.42171942605637)
    assert level.throughput_requests_per_s == 3.483002633829972
    assert level.throughput_output_tokens_per_s == 696.6005267659943
    assert level.throughput_total_tokens_per_s == 28557.13859477194
    assert level.throughput_input_tokens_per_s == pytest.approx(1599800 / 57.42171942605637)
    assert level.mean_input_tokens == pytest.approx(1599800 / 200)
    ttft = level.ttft_s
    assert ttft is not None
    assert (ttft.mean, ttft.p50, ttft.p95, ttft.p99, ttft.std) == pytest.approx(
        (
            0.24357119981985306,
            0.24408852099440992,
            0.2570488001947524,
            0.26166544687526766,
            0.016538860460397625,
        )
    )
    assert ttft.p90 is None  # --metric-percentiles 95,99: stored as absent, never guessed
    assert level.itl_s is not None
    assert level.itl_s.p99 == pytest.approx(0.2165980374556966)
    assert level.e2e_s is None  # e2el was not among --percentile-metrics
    lines = gaps(benchmark)
    assert any(
        line.startswith("level 0: TTFT p90 absent") and "--metric-percentiles 50,90,95,99" in line
        for line in lines
    )
    assert "level 0: E2E absent" in lines


def test_inference_perf_stage_report() -> None:
    path = UPSTREAM / "inference-perf" / "stage_0_lifecycle_metrics.json"
    with pytest.raises(IngestError, match="--model"):
        ingest_files([path], "inference-perf")
    benchmark = ingest_files([path], "inference-perf", model="Qwen/Qwen3-0.6B")
    (level,) = benchmark.levels
    assert (level.mode, level.rate_per_s) == ("open_loop", 1.0)
    assert (level.completed, level.failed) == (60, 0)
    assert level.throughput_requests_per_s == 0.996850670841712
    assert level.duration_s == pytest.approx(60 / 0.996850670841712)
    assert level.throughput_input_tokens_per_s == 200.05131546008423
    assert level.throughput_total_tokens_per_s == 262.204954787065
    ttft = level.ttft_s
    assert ttft is not None
    assert (ttft.mean, ttft.p50, ttft.p90, ttft.p99) == pytest.approx(
        (0.03331898592878133, 0.032918093027547, 0.03897771495394409, 0.04251505806925707)
    )
    assert level.tpot_s is not None
    assert level.tpot_s.mean == pytest.approx(0.0034775777890777705)
    assert level.e2e_s is not None
    assert level.e2e_s.max == pytest.approx(0.49427202600054443)


def test_inference_perf_pooled_summary_is_refused() -> None:
    path = UPSTREAM / "inference-perf" / "summary_lifecycle_metrics.json"
    with pytest.raises(IngestError, match=r"requested_rate .*stage_<n>_lifecycle_metrics"):
        ingest_files([path], "inference-perf", model="m")


def test_llmd_benchmark_report_v02() -> None:
    benchmark = ingest_files([UPSTREAM / "llm-d" / "br_v0_2_example.yaml"], "llm-d")
    assert benchmark.model == "Qwen/Qwen3-0.6B"
    (level,) = benchmark.levels
    assert (level.mode, level.rate_per_s) == ("open_loop", 10.0)  # concurrency .inf
    assert (level.requests, level.failed) == (500, 0)
    assert level.duration_s == pytest.approx(49.97206788184121)  # PT49.97206788184121S
    assert level.throughput_requests_per_s == 2262.448
    ttft = level.ttft_s
    assert ttft is not None
    assert (ttft.mean, ttft.p90, ttft.max) == pytest.approx(
        (0.0368578234128654, 0.04262634576298297, 0.0574655020609498)
    )
    tpot = level.tpot_s
    assert tpot is not None
    assert tpot.mean == pytest.approx(0.0368578234128654)
    assert tpot.absent == ["p50", "p90", "p95", "p99"]  # the report gives only a mean


def test_aiperf_warmup_records_are_left_out(tmp_path: Path) -> None:
    lines = (AIPERF_RUN1 / "profile_export.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    ok = [r for r in records if not r.get("error")]
    for record in ok[:5]:  # relabel five completed requests as warm-up
        record["metadata"]["credit_phase"] = "warmup"
    (tmp_path / "profile_export.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    shutil.copy(AIPERF_RUN1 / "profile_export_aiperf.json", tmp_path)
    (level,) = ingest_files([tmp_path / "profile_export.jsonl"], "aiperf").levels
    assert (level.completed, level.failed) == (89 - 5, 11)
    ttft_s = np.array([r["metrics"]["ttft"]["value"] for r in ok[5:]]) / 1e3
    assert level.ttft_s is not None
    assert level.ttft_s.mean == pytest.approx(float(ttft_s.mean()))
