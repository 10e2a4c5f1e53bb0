"""``servesize size``: the --slo grammar, the ranked plan table and the rejected summary."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from servesize.cli import app
from servesize.core.sizing.slo_text import parse_duration_s, parse_slo

runner = CliRunner()
WIDE = {"COLUMNS": "250"}
BASE = ["size", "--model", "meta-llama/Llama-3.1-8B", "--rate", "8"]


def _rows(output: str) -> list[list[str]]:
    """The plan table's body rows, cells stripped."""
    rows = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0].isdigit():
            rows.append(cells)
    return rows


def test_parse_slo_reads_every_metric_statistic_and_unit() -> None:
    slo = parse_slo(
        "ttft_p95=1s, tpot_p95=50ms,itl_p99=200us,e2e_mean=1.5s,ttft_p50=.25s,max_failure_rate=0.01"
    )
    assert [(t.metric, t.statistic, t.limit_s) for t in slo.targets] == [
        ("ttft", "p95", 1.0),
        ("tpot", "p95", 0.05),
        ("itl", "p99", 0.0002),
        ("e2e", "mean", 1.5),
        ("ttft", "p50", 0.25),
    ]
    assert slo.max_failure_rate == 0.01
    assert parse_slo("tpot_p90=20ms").max_failure_rate == 0.0
    assert parse_duration_s("2.5ms") == 0.0025


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ("ttft_p95=1", "'1' is not a duration"),
        ("ttft_p95=1sec", "'1sec' is not a duration"),
        ("ttft_p95=-1s", "'-1s' is not a duration"),
        ("ttft_p95=0ms", "the limit must be > 0"),
        ("ttfx_p95=1s", "unknown metric 'ttfx'"),
        ("ttft_p42=1s", "unknown statistic 'p42'"),
        ("ttft=1s", "unknown metric 'ttft'"),
        ("ttft_p95", "expected key=value"),
        ("ttft_p95=1s,,tpot_p95=50ms", "empty item"),
        ("ttft_p95=1s,ttft_p95=2s", "'ttft_p95' is given twice"),
        ("max_failure_rate=1.5", "max_failure_rate: '1.5' is not a number in [0, 1)"),
        ("max_failure_rate=0.01", "at least one latency target"),
    ],
)
def test_malformed_slo_exits_with_the_reason(slo: str, message: str) -> None:
    result = runner.invoke(app, [*BASE, "--slo", slo, "--gpu", "l4"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "--slo: " in result.output
    assert message in result.output


def test_table_lists_the_cheaper_gpu_first_when_both_meet_the_slo() -> None:
    # A loose SLO at 8 requests/s that an A100 and an H100 both meet; the A100 costs $1/h, the
    # H100 $10/h, so every A100 plan ranks before every H100 plan.
    result = runner.invoke(
        app,
        [
            *BASE,
            "--slo",
            "ttft_p95=2s,tpot_p95=100ms",
            "--gpu",
            "h100-sxm",
            "--gpu",
            "a100-sxm-80gb",
            "--price",
            "h100-sxm=10",
            "--price",
            "a100-sxm-80gb=1",
            "--input-tokens",
            "512",
            "--output-tokens",
            "128",
            "--tp",
            "1",
            "--verify-top",
            "1",
        ],
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    hardware = [row[1].split()[0] for row in rows]
    assert hardware[0] == "a100-sxm-80gb"
    assert "h100-sxm" in hardware
    assert hardware == sorted(hardware)  # "a100..." < "h100...": A100 plans first
    _, _, gpus, cost, per_million = rows[0][:5]
    replicas, per_replica = (int(v) for v in gpus.split("×"))
    # $/hour = replicas × GPUs per replica × $1;
    # $/M output tokens = $/hour / (8 requests/s × 128 tokens × 3600 s) × 1e6.
    assert float(cost) == replicas * per_replica * 1.0
    assert float(per_million) == pytest.approx(float(cost) / (8 * 128 * 3600) * 1e6, abs=5e-4)
    assert rows[0][-1] == "sim"  # the first plan was verified by simulation
    served = "vllm serve meta-llama/Llama-3.1-8B --port 8000 --tensor-parallel-size 1"
    assert served in result.output
    # Only the engine sized for: no SGLang command for a vLLM plan.
    assert "sglang" not in result.output
    assert "--kv-cache-memory-bytes" in result.output


def test_rejected_candidates_are_summarised_with_their_reason() -> None:
    # 70B parameters in bf16 are ~141 GB: they fit no 24 GB L4 at TP1.
    result = runner.invoke(
        app,
        [
            "size",
            "--model",
            "meta-llama/Llama-3.1-70B",
            "--rate",
            "1",
            "--slo",
            "ttft_p95=1s",
            "--gpu",
            "l4",
            "--tp",
            "1",
        ],
        env=WIDE,
    )
    assert result.exit_code == 1, result.output
    assert "rejected 4 of 4 candidates:" in result.output  # 2 token budgets × 2 KV dtypes
    assert "does-not-fit: 4, e.g. l4 vllm TP1" in result.output
    assert "the weights need" in result.output
    assert "no candidate meets the SLO" in result.output


def test_bad_prices_and_gpus_are_refused() -> None:
    slo = ["--slo", "ttft_p95=1s", "--gpu", "l4"]
    outside = runner.invoke(app, [*BASE, *slo, "--price", "h100-sxm=2"], env=WIDE)
    assert outside.exit_code == 2
    assert "'h100-sxm' is not among the GPUs searched (l4)" in outside.output
    free = runner.invoke(app, [*BASE, *slo, "--price", "l4=0"], env=WIDE)
    assert free.exit_code == 2
    assert "the price must be > 0" in free.output
    unknown = runner.invoke(app, [*BASE, "--slo", "ttft_p95=1s", "--gpu", "no-such-gpu"], env=WIDE)
    assert unknown.exit_code == 1
    assert "unknown GPU 'no-such-gpu'" in unknown.output


def test_the_table_keeps_every_number_whole_at_80_columns() -> None:
    result = runner.invoke(
        app,
        [
            *BASE,
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
            "--verify-top",
            "1",
            "--disaggregation",
        ],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    table = result.output.split("#1 vllm:")[0]
    assert "…" not in table
    assert max(len(line) for line in table.splitlines()[1:]) <= 80
    # One A100 at $1/h: $1.00/hour and $1 / (8 requests/s × 128 tokens × 3600 s) × 1e6 = $0.271
    # per million output tokens; the disaggregated pair costs twice that.
    assert re.search(r"\b1×1\s+1\.00\s+0\.271\s", table)
    assert re.search(r"\(1P\+1D\)×1\s+2\.00\s+0\.543\s", table)
