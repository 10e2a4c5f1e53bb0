"""The serving-feature flags of ``servesize perf``, ``simulate`` and ``size``: shared
prefixes, sessions, a host KV tier and speculative decoding reach the replica path."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from servesize.cli import app
from servesize.core.memory import Deployment
from servesize.core.replica import compile_replica
from servesize.core.steptime import StepWork
from tests.core.sizing.fixtures import H100, LLAMA_8B
from tests.core.sizing.test_sizing_features import EAGLE, _per_token_s, _step_s

runner = CliRunner()
MODEL = ["--model", "meta-llama/Llama-3.1-8B"]


def test_simulate_prefix_and_offload_flags() -> None:
    # Identical 992-token heads of 1000-token prompts: every request after the first
    # finds ⌊992/16⌋·16 = 992 tokens cached.
    out = runner.invoke(
        app,
        [
            "simulate", *MODEL, "--gpu", "h100-sxm", "--rate", "2", "--input-tokens", "1000",
            "--output-tokens", "4", "--num-requests", "50", "--shared-prefix-tokens", "992",
            "--kv-offload-gib", "8", "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    answer = json.loads(out.stdout)
    assert answer["prefix_cache_hit_rate"] == 0.992
    assert answer["host_kv_hit_rate"] == 0.0  # the GPU keeps the one prefix


def test_simulate_sessions_and_speculative_flags() -> None:
    out = runner.invoke(
        app,
        [
            "simulate", *MODEL, "--gpu", "h100-sxm", "--sessions-per-s", "1", "--turns", "3",
            "--input-tokens", "100", "--output-tokens", "50", "--num-requests", "30",
            "--speculative", "ngram", "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    answer = json.loads(out.stdout)
    assert answer["completed"] == 30  # 10 sessions of 3 turns


def test_perf_sessions_flags_take_the_session_means() -> None:
    out = runner.invoke(
        app,
        [
            "perf", *MODEL, "--gpu", "h100-sxm", "--sessions-per-s", "1", "--turns", "3",
            "--input-tokens", "100", "--output-tokens", "50", "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    sessions = json.loads(out.stdout)["sessions"]
    # Prompts 100, 250, 400: mean 250, history (100 + 50)·6/6 = 150, 3 turns/s.
    assert (sessions["input_tokens"], sessions["history_tokens"]) == (250.0, 150.0)
    assert sessions["requests_per_s"] == 3.0


def test_size_offers_speculation_and_launches_it(tmp_path: Path) -> None:
    replica = compile_replica(
        LLAMA_8B,
        H100,
        Deployment(max_model_len=2048, max_num_batched_tokens=8192),
        speculative=EAGLE,
    )
    plain = _step_s(replica, StepWork.decode(1, 512 + 128))
    fast = _per_token_s(replica, EAGLE, 1, 512 + 128)
    limit_ms = (plain * fast) ** 0.5 * 1e3
    out = runner.invoke(
        app,
        [
            "size", *MODEL, "--rate", "0.5", "--gpu", "h100-sxm", "--tp", "1",
            "--input-tokens", "512", "--output-tokens", "256", "--slo",
            f"tpot_mean={limit_ms:.3f}ms", "--speculative", "eagle3", "--verify-top", "0",
            "--report", str(tmp_path / "size.html"),
        ],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "spec=eagle3/k3/E2.95" in out.output
    assert "--speculative-config" in out.output
    assert "Speculative decoding chosen" in out.output
    # The report's REST body offers the same grid: plain decoding and the draft.
    page = (tmp_path / "size.html").read_text(encoding="utf-8")
    assert '"speculative": [null, {"method": "eagle3", "num_speculative_tokens": 3' in page


def test_size_sessions_rate_and_refusals() -> None:
    out = runner.invoke(
        app,
        [
            "size", *MODEL, "--sessions-per-s", "1", "--turns", "3", "--input-tokens", "100",
            "--output-tokens", "50", "--gpu", "h100-sxm", "--tp", "1", "--slo", "ttft_mean=1s",
            "--verify-top", "0", "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["target_rate_per_s"] == 3.0
    both = runner.invoke(app, ["size", *MODEL, "--rate", "1", "--sessions-per-s", "1"])
    assert both.exit_code == 2
    neither = runner.invoke(app, ["size", *MODEL, "--slo", "ttft_mean=1s"])
    assert neither.exit_code == 2
    assert "exactly one of --rate and --sessions-per-s" in neither.output
