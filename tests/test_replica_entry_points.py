"""One deployment through every entry point gives one scheduler and one set of step times.

The same Llama-3.1-8B deployment (two data-parallel ranks, an 8192-token context, a 2048-token
budget) goes through ``/v1/performance``, ``/v1/simulate``, ``servesize perf``, ``servesize
simulate`` and :func:`compile_replica` directly; each must report the replica the core compiles.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from servesize.calibration import load_measured_profile
from servesize.catalog import ModelCatalog
from servesize.cli import app
from servesize.cli.planning import scheduler_line
from servesize.core.hardware import datasheet_spec
from servesize.core.memory import Deployment
from servesize.core.replica import Replica, compile_replica
from servesize.core.steptime import closed_loop
from servesize.db.seed import datasheet_entries
from servesize.settings import get_settings

MODEL = "meta-llama/Llama-3.1-8B"
GPU = "h100-sxm"
DEPLOYMENT: dict[str, Any] = {
    "data_parallel_size": 2,
    "max_model_len": 8192,
    "max_num_batched_tokens": 2048,
}
WORKLOAD = {"concurrency": 8, "input_tokens": 4096, "output_tokens": 64}
runner = CliRunner()


def _direct() -> Replica:
    arch = ModelCatalog(get_settings().models_dir).architecture(MODEL)
    h100 = next(s for s in (datasheet_spec(e) for e in datasheet_entries()) if s.id == GPU)
    return compile_replica(arch, h100, Deployment(**DEPLOYMENT), load_measured_profile())


@pytest.fixture(scope="module")
def direct() -> Replica:
    return _direct()


def _step_times(replica: Replica) -> dict[str, float]:
    est = closed_loop(
        replica.step_model,
        concurrency=WORKLOAD["concurrency"],
        input_tokens=WORKLOAD["input_tokens"],
        output_tokens=WORKLOAD["output_tokens"],
        kv_capacity_tokens=replica.memory.kv_capacity_tokens,
    )
    return {
        "prefill_time_s": float(est.prefill_time_s[0]),
        "decode_step_time_s": float(est.decode_step_time_s[0]),
        "ttft_s": float(est.ttft_s[0]),
        "tpot_s": float(est.tpot_s[0]),
    }


def test_the_compiled_replica_pools_two_ranks(direct: Replica) -> None:
    # Worked by hand: two ranks of 2048 tokens and vLLM's 1024 sequences (H100 defaults).
    scheduler = direct.scheduler
    assert (scheduler.max_num_batched_tokens, scheduler.max_num_seqs) == (4096, 2048)
    assert scheduler.num_kv_blocks == 2 * direct.memory.kv_blocks
    assert (scheduler.block_size_tokens, scheduler.policy) == (16, "vllm_v1")


def test_every_entry_point_reports_the_same_replica(client: TestClient, direct: Replica) -> None:
    expected_steps = _step_times(direct)
    scheduler = direct.scheduler

    performance = client.post(
        "/v1/performance",
        json={"model": MODEL, "hardware": GPU, "deployment": DEPLOYMENT, "workload": WORKLOAD},
    )
    assert performance.status_code == 200, performance.text
    for name, value in expected_steps.items():
        assert performance.json()[name] == pytest.approx(value, rel=1e-12), name

    simulated = client.post(
        "/v1/simulate",
        json={
            "model": MODEL,
            "hardware": GPU,
            "deployment": DEPLOYMENT,
            "traffic": {"num_requests": 20, "input_tokens": 256, "output_tokens": 8},
        },
    )
    assert simulated.status_code == 200, simulated.text
    assert simulated.json()["engine_config"] == {
        "policy": scheduler.policy,
        "max_num_seqs": scheduler.max_num_seqs,
        "max_num_batched_tokens": scheduler.max_num_batched_tokens,
        "kv_block_size": scheduler.block_size_tokens,
        "kv_blocks": scheduler.num_kv_blocks,
        "engine_replicas": 1,
        "capacity_policy": scheduler.capacity_policy,
        "prefix_caching": scheduler.prefix_caching,
    }

    cli = ["--model", MODEL, "--gpu", GPU, "--dp", "2", "--max-model-len", "8192"]
    budget = ["--max-num-batched-tokens", "2048"]
    load = [f"--{k.replace('_', '-')}={v}" for k, v in WORKLOAD.items()]
    perf = runner.invoke(app, ["perf", *cli, *budget, *load, "--json"])
    assert perf.exit_code == 0, perf.output
    figures = json.loads(perf.stdout)
    assert figures["kv_capacity_tokens"] == direct.memory.kv_capacity_tokens
    for name, value in expected_steps.items():
        assert figures[name] == pytest.approx(value, rel=1e-12), name

    small = ["--num-requests", "20", "--input-tokens", "256", "--output-tokens", "8"]
    run = runner.invoke(
        app, ["simulate", *cli, *budget, *small, "--rate", "2"], env={"COLUMNS": "200"}
    )
    assert run.exit_code == 0, run.output
    assert scheduler_line(scheduler) in run.output


def test_the_cli_imports_no_server_module_to_list_models() -> None:
    code = (
        "import sys; from typer.testing import CliRunner; from servesize.cli import app; "
        "r = CliRunner().invoke(app, ['models', 'list']); assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in ('fastapi', 'sqlalchemy', 'uvicorn', 'servesize.api') "
        "if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[]"
