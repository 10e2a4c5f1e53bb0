"""``servesize perf`` and ``simulate`` compile through the core replica: same refusals, same
parallel degrees as the API."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from servesize.cli import app

runner = CliRunner()
BASE = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]


def test_data_parallel_ranks_reach_the_scheduler_and_the_step_model() -> None:
    """Regression: the CLI compiled replicas without DP (and EP)."""
    small = ["--rate", "1", "--num-requests", "10", "--input-tokens", "64", "--output-tokens", "4"]
    one = runner.invoke(app, ["simulate", *BASE, *small, "--json"])
    two = runner.invoke(app, ["simulate", *BASE, *small, "--dp", "2", "--json"])
    assert two.exit_code == 0, two.output
    single = json.loads(one.stdout)["engine_config"]
    pooled = json.loads(two.stdout)["engine_config"]
    assert pooled["max_num_batched_tokens"] == 2 * single["max_num_batched_tokens"]
    assert pooled["max_num_seqs"] == 2 * single["max_num_seqs"]
    assert pooled["kv_blocks"] == 2 * single["kv_blocks"]


def test_a_replayed_request_over_max_model_len_is_refused(tmp_path: Path) -> None:
    """Regression: a trace was replayed without the max_model_len check the fixed lengths had."""
    trace = tmp_path / "trace.jsonl"
    rows = [(0, 256, 16), (250, 3000, 100), (500, 256, 16)]
    trace.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": {p}, "output_length": {n}}}\n' for t, p, n in rows
        )
    )
    args = ["simulate", *BASE, "--max-model-len", "2048", "--trace", str(trace)]
    refused = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert refused.exit_code == 2, refused.output
    assert "1 requests exceed max_model_len (2048" in refused.output
    assert "request 1" in refused.output


def test_the_whole_prompt_refusal_is_the_cores_message() -> None:
    long = ["--input-tokens", "10000", "--max-model-len", "16384", "--rate", "0.5"]
    refused = runner.invoke(app, ["simulate", *BASE, *long, "--engine", "trtllm"])
    assert refused.exit_code == 2
    assert "requests reach 10000 tokens and the budget is 8192 per rank" in refused.output
    # MAX_UTILIZATION recomputes 10,000 + 256 − 1 tokens after a late pause.
    paused = ["--capacity-scheduler-policy", "max_utilization"]
    evicting = runner.invoke(app, ["simulate", *BASE, *long, "--engine", "trtllm", *paused])
    assert evicting.exit_code == 2
    assert "requests reach 10255 tokens" in evicting.output
