"""``--capacity-scheduler-policy`` reaches the simulated engine; other engines refuse it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from servesize.cli import app

runner = CliRunner()
BASE = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
SMALL = ["--rate", "1", "--num-requests", "10", "--input-tokens", "64", "--output-tokens", "4"]


def test_the_trtllm_capacity_policy_reaches_the_scheduler() -> None:
    trtllm = ["simulate", *BASE, *SMALL, "--engine", "trtllm", "--json"]
    default = runner.invoke(app, trtllm)
    assert default.exit_code == 0, default.output
    config = json.loads(default.stdout)["engine_config"]
    assert config["capacity_policy"] == "guaranteed_no_evict"
    chosen = runner.invoke(app, [*trtllm, "--capacity-scheduler-policy", "max_utilization"])
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.stdout)["engine_config"]["capacity_policy"] == "max_utilization"


def test_vllm_refuses_a_capacity_scheduler_policy() -> None:
    result = runner.invoke(
        app, ["perf", *BASE, "--capacity-scheduler-policy", "max_utilization", "--json"]
    )
    assert result.exit_code == 1
    assert "/deployment/capacity_scheduler_policy" in result.output
