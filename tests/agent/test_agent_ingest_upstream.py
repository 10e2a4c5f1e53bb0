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
