"""Energy in the CLI: the perf table, the CSV columns and ``size --rank-by energy``."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from servesize.cli import app

runner = CliRunner()
PERF = ["perf", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--concurrency", "8"]


def test_perf_prints_and_exports_the_energy() -> None:
    table = runner.invoke(app, PERF, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "energy per M output tokens" in table.output
    exported = runner.invoke(app, [*PERF, "--csv"])
    assert exported.exit_code == 0, exported.output
    [row] = list(csv.DictReader(io.StringIO(exported.stdout)))
    # kWh per million tokens = (W / tokens per s) · 1e6 / 3.6e6 J per kWh
    per_token_j = float(row["power_w"]) / float(row["throughput_output_tokens_per_s"])
    assert float(row["energy_per_million_output_tokens_kwh"]) == pytest.approx(per_token_j / 3.6)


def test_size_ranks_by_energy_when_asked() -> None:
    args = [
        "size",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--rate",
        "8",
        "--slo",
        "ttft_p95=2s,tpot_p95=100ms",
        "--gpu",
        "h100-sxm",
        "--gpu",
        "a100-sxm-80gb",
        "--tp",
        "1",
        "--tp",
        "2",
        "--verify-top",
        "0",
        "--rank-by",
        "energy",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    kwh = [p["energy"]["energy_per_million_output_tokens_kwh"] for p in plans]
    assert kwh == sorted(kwh)
    bad = runner.invoke(app, [*args[:-3], "--rank-by", "speed"])
    assert bad.exit_code != 0
    assert "--rank-by" in bad.output
