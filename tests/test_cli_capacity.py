"""``--capacity-scheduler-policy`` reaches the simulated engine; other engines refuse it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from servesize.cli import app

runner = CliRunner()
BASE = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]


def test_the_trtllm_capacity_policy_reaches_the_scheduler() -> None:
    default = runner.invoke(app, ["perf", *BASE, "--engine", "trtllm", "--json"])
    assert default.exit_code == 0, default.output
    assert json.loads(default.output)["scheduler"]["capacity_policy"] == "guaranteed_no_evict"
    knob = ["--capacity-scheduler-policy", "max_utilization"]
    chosen = runner.invoke(app, ["perf", *BASE, "--engine", "trtllm", *knob, "--json"])
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.output)["scheduler"]["capacity_policy"] == "max_utilization"


def test_vllm_refuses_a_capacity_scheduler_policy() -> None:
    result = runner.invoke(
        app, ["perf", *BASE, "--capacity-scheduler-policy", "max_utilization", "--json"]
    )
    assert result.exit_code == 1
    assert "/deployment/capacity_scheduler_policy" in result.output
