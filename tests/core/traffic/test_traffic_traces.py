"""Trace files and histogram lengths, against values written out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servesize.core.traffic import HistogramLength
from servesize.core.traffic.traces import TraceError, check_trace, parse_trace


def test_mooncake_jsonl_times_are_milliseconds_from_the_first_request() -> None:
    text = (
        '{"timestamp": 27482, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}\n'
        "\n"
        '{"timestamp": 30000, "input_length": 672, "output_length": 26, "hash_ids": [46]}\n'
    )
    trace = parse_trace(text, "jsonl", max_rows=10)
    assert trace.arrival_s.tolist() == pytest.approx([0.0, 2.518])
    assert trace.input_tokens.tolist() == [655, 672]
    assert trace.output_tokens.tolist() == [52, 26]


def test_csv_accepts_burstgpt_style_headers_in_seconds() -> None:
    text = "Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,100,20\n7.5,GPT-4,30,4\n"
    trace = parse_trace(text, "csv", max_rows=10)
    assert trace.arrival_s.tolist() == [0.0, 2.5]
    assert trace.input_tokens.tolist() == [100, 30]
    assert trace.output_tokens.tolist() == [20, 4]


@pytest.mark.parametrize(
    ("text", "fmt", "index"),
    [
        ('{"timestamp": 0, "input_length": 1}\n', "jsonl", 1),
        ("not json\n", "jsonl", 1),
        ("arrival_s,input_tokens\n0,1\n", "csv", 1),
        ("arrival_s,input_tokens,output_tokens\n0,1,1\n0,x,1\n", "csv", 3),
        ("arrival_s,input_tokens,output_tokens\n0,1,1\n0,1,1\n0,1,1\n", "csv", 4),
    ],
)
def test_bad_files_name_the_line(text: str, fmt: str, index: int) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace(text, fmt, max_rows=2)  # type: ignore[arg-type]
    assert caught.value.field == "file"
    assert caught.value.index == index


def test_check_trace_names_the_first_offender() -> None:
    ok = np.array([1, 1, 1])
    with pytest.raises(TraceError) as caught:
        check_trace(np.array([0.0, 2.0, 1.0]), ok, ok)
    assert (caught.value.field, caught.value.index) == ("arrival_s", 2)
    with pytest.raises(TraceError) as caught:
        check_trace(np.array([0.0, 1.0, 2.0]), ok, np.array([1, 2.5, 1]))
    assert (caught.value.field, caught.value.index) == ("output_tokens", 1)
    with pytest.raises(TraceError) as caught:
        check_trace(np.array([0.0, 1.0]), ok, ok[:2])
    assert caught.value.field == "input_tokens"


def test_histogram_of_values_draws_exactly_those_values_by_weight() -> None:
    hist = HistogramLength.from_values([300, 100, 100], [1.0, 2.0, 1.0])
    # 100 has weight 3 of 4, 300 weight 1 of 4: mean 0.75 · 100 + 0.25 · 300 = 150.
    assert hist.mean_tokens == 150.0
    draws = hist.sample(40_000, np.random.default_rng(0))
    assert set(np.unique(draws).tolist()) == {100, 300}
    share = float(np.mean(draws == 300))
    # Binomial(40,000, 1/4): standard deviation sqrt(0.25 · 0.75 / 40,000) ≈ 0.0022.
    assert abs(share - 0.25) < 5 * 0.0022
    with pytest.raises(ValueError, match="weights"):
        HistogramLength.from_values([1, 2], [1.0])


# --------------------------------------------------------------------- more formats

_DATA = Path(__file__).resolve().parents[2] / "data" / "traces"


def test_azure_conv_trace_excerpt() -> None:
    """The first rows of AzureLLMInferenceTrace_conv.csv (tests/data/traces/SOURCES.md): the
    first request at 18:15:46.6805900, the second at 18:15:50.9951690 (4.314579 s later), the
    last of the 8 at 18:15:54.9320210 (8.251431 s)."""
    trace = parse_trace((_DATA / "azure_llm_conv_head.csv").read_text(), "azure", max_rows=100)
    assert trace.size == 8
    assert trace.arrival_s[1] == pytest.approx(4.314579, abs=1e-6)
    assert trace.arrival_s[-1] == pytest.approx(8.251431, abs=1e-6)
    assert trace.input_tokens.tolist() == [374, 396, 879, 91, 91, 381, 1313, 388]
    assert trace.output_tokens.tolist() == [44, 109, 55, 16, 16, 84, 142, 84]


def test_azure_code_trace_reads_as_csv_too() -> None:
    text = (_DATA / "azure_llm_code_head.csv").read_text()
    trace = parse_trace(text, "csv", max_rows=100)
    # 18:17:03.9799600 → 18:17:04.5191470: 0.539187 s.
    assert trace.arrival_s[-1] == pytest.approx(0.539187, abs=1e-6)
    assert trace.input_tokens.tolist() == [4808, 3180, 110, 7433, 34, 374]


def test_vllm_detailed_result_drops_failed_requests() -> None:
    """start_times 51234.125 … 51236.25; request 2 failed (errors[2]) and is left out."""
    trace = parse_trace((_DATA / "vllm_bench_detailed.json").read_text(), "vllm", max_rows=100)
    assert trace.arrival_s.tolist() == [0.0, 0.5, 1.75, 2.125]
    assert trace.input_tokens.tolist() == [512, 1024, 400, 520]
    assert trace.output_tokens.tolist() == [128, 256, 32, 32]


def test_vllm_result_without_start_times_uses_its_request_rate() -> None:
    doc = {"input_lens": [10, 20, 30], "output_lens": [1, 2, 3], "request_rate": 4.0}
    assert parse_trace(json.dumps(doc), "vllm", max_rows=10).arrival_s.tolist() == [
        0.0,
        0.25,
        0.5,
    ]
    doc["request_rate"] = "inf"  # vLLM sends every request at once
    assert parse_trace(json.dumps(doc), "vllm", max_rows=10).arrival_s.tolist() == [0.0] * 3


def test_plain_jsonl_in_seconds() -> None:
    text = (
        '{"arrival_s": 1.5, "input_tokens": 8, "output_tokens": 2}\n'
        '{"arrival_s": 2.0, "input_tokens": 9, "output_tokens": 3}\n'
    )
    trace = parse_trace(text, "jsonl", max_rows=10)
    assert trace.arrival_s.tolist() == [0.0, 0.5]
    assert trace.input_tokens.tolist() == [8, 9]


@pytest.mark.parametrize(
    ("text", "fmt", "line"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\nyesterday,1,1\n",
            "azure",
            3,
        ),
        ("arrival_s,input_tokens,output_tokens\n0,1,1\n\n1,0,1\n", "csv", 4),
        ('{"input_lens": [1, 2], "output_lens": [1, 0], "request_rate": 1}', "vllm", 2),
        ('{"input_lens": [1, 2], "output_lens": [1]}', "vllm", 1),
        ('{"output_lens": [1]}', "vllm", 1),
    ],
)
def test_bad_rows_name_their_line(text: str, fmt: str, line: int) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace(text, fmt, max_rows=10)  # type: ignore[arg-type]
    assert caught.value.field == "file"
    assert caught.value.index == line
