"""The ``servesize`` command line, run in-process and as a real server process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from servesize import __version__
from servesize.cli import app
from servesize.settings import get_settings

runner = CliRunner()


@pytest.fixture
def sqlite_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"servesize {__version__}"


def test_db_upgrade_current_downgrade(sqlite_env: str) -> None:
    assert "behind head" in runner.invoke(app, ["db", "current"]).output
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "(at head)" in result.output
    # The datasheet profiles are stored data: a downgrade that drops them asks first.
    refused = runner.invoke(app, ["db", "downgrade", "base"])
    assert refused.exit_code == 1, refused.output
    assert "table hardware_profile" in refused.output
    assert "--yes-destroy-data" in refused.output
    assert "(at head)" in runner.invoke(app, ["db", "current"]).output  # nothing changed
    result = runner.invoke(app, ["db", "downgrade", "base", "--yes-destroy-data"])
    assert result.exit_code == 0, result.output
    assert "current: base" in result.output


def test_keys_create_list_revoke(sqlite_env: str) -> None:
    runner.invoke(app, ["db", "upgrade"])
    created = runner.invoke(app, ["keys", "create", "--scope", "admin", "--name", "root"])
    assert created.exit_code == 0, created.output
    key = created.output.strip().splitlines()[-1]
    assert key.startswith("ssk_")
    key_id = key.split("_")[1]

    listed = runner.invoke(app, ["keys", "list"])
    assert key_id in listed.output
    assert key not in listed.output  # the secret is never shown again

    assert runner.invoke(app, ["keys", "revoke", key_id]).exit_code == 0
    assert runner.invoke(app, ["keys", "revoke", "0000000000000000"]).exit_code == 1


def test_traces_upload_stores_the_file(sqlite_env: str) -> None:
    from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
    from servesize.db.repository import TraceRepository

    runner.invoke(app, ["db", "upgrade"])
    data = Path(__file__).parent / "data" / "traces"
    azure = data / "azure_llm_conv_head.csv"
    stored = runner.invoke(app, ["traces", "upload", str(azure), "--format", "azure"])
    assert stored.exit_code == 0, stored.output
    trace_id = stored.output.strip().splitlines()[-1]
    assert "8 requests over 8.3 s" in stored.output
    engine = create_db_engine(sqlite_env)
    with transaction(make_sessionmaker(engine)) as session:
        row = TraceRepository(session).get(trace_id)
        assert row is not None
        assert row.content == azure.read_text()
        assert row.owner_key_id is None
    engine.dispose()
    vllm = runner.invoke(app, ["traces", "upload", str(data / "vllm_bench_detailed.json")])
    assert vllm.exit_code == 0, vllm.output
    assert "4 requests" in vllm.output  # the .json name reads as vLLM; the failed one dropped
    bad = runner.invoke(app, ["traces", "upload", str(azure), "--format", "jsonl"])
    assert bad.exit_code == 1
    assert "line 1" in bad.output


def test_keys_create_rejects_unknown_scope(sqlite_env: str) -> None:
    runner.invoke(app, ["db", "upgrade"])
    result = runner.invoke(app, ["keys", "create", "--scope", "root"])
    assert result.exit_code != 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


STARTUP_LIMIT_S = 600.0
"""Only a hung server reaches this: start-up (imports, migrations) takes seconds when idle and
stays far below it at load 10 on 2 cores. Probes get a similar per-request bound."""
PROBE_TIMEOUT_S = 120.0


def _wait_for_livez(process: subprocess.Popen[bytes], url: str, log: Path) -> httpx2.Response:
    """Poll until the server answers (it binds the port after migrating); fail at once if the
    process exits."""
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while True:
        try:
            return httpx2.get(url, timeout=PROBE_TIMEOUT_S)
        except httpx2.TransportError:
            if process.poll() is not None:
                pytest.fail(f"the server exited ({process.returncode}): {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no answer in {STARTUP_LIMIT_S:g} s: {log.read_text()[-2000:]}")
            time.sleep(0.2)


def test_serve_migrates_and_answers_probes(tmp_path: Path) -> None:
    """What ``make run`` does: a fresh database is migrated and the probes answer 200."""
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'served.db'}"}
    command = [sys.executable, "-m", "servesize", "serve", "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        live = _wait_for_livez(process, f"http://127.0.0.1:{port}/livez", log)
        ready = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=PROBE_TIMEOUT_S)
    finally:
        process.terminate()
        try:
            process.wait(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert live.status_code == 200
    assert ready.status_code == 200, ready.text


MODELS_DIR = Path(__file__).resolve().parents[1] / "servesize" / "data" / "models"


def test_models_list_and_show() -> None:
    listed = runner.invoke(app, ["models", "list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "meta-llama/Llama-3.1-8B" in listed.output
    shown = runner.invoke(app, ["models", "show", "meta-llama/Llama-3.1-8B"])
    assert shown.exit_code == 0
    assert json.loads(shown.output)["parameters_total"] == 8_030_261_248
    assert runner.invoke(app, ["models", "show", "nobody/nothing"]).exit_code == 1


def test_piped_tables_keep_whole_ids() -> None:
    """Without COLUMNS and without a terminal the table takes its natural width: the longest
    catalogue id is printed whole, and no line is padded beyond the table; a narrow COLUMNS is
    obeyed (and truncates it). An id longer than any terminal is in tests/test_cli_exports.py."""
    longest = max((p.stem for p in MODELS_DIR.glob("*.json")), key=len)
    piped = runner.invoke(app, ["models", "list"], env={"COLUMNS": ""})
    assert piped.exit_code == 0, piped.output
    assert max(len(line) for line in piped.output.splitlines()) <= 240
    ids = {line.split("│")[1].strip() for line in piped.output.splitlines() if "│" in line}
    assert longest.replace("--", "/", 1) in ids, (longest, ids)
    narrow = runner.invoke(app, ["models", "list"], env={"COLUMNS": "40"})
    assert max(len(line) for line in narrow.output.splitlines()) <= 40


def test_models_inspect_file(tmp_path: Path) -> None:
    config = json.loads((MODELS_DIR / "meta-llama--Llama-3.1-8B.json").read_text())
    good = tmp_path / "config.json"
    good.write_text(json.dumps(config))
    result = runner.invoke(app, ["models", "inspect", str(good)])
    assert result.exit_code == 0
    assert json.loads(result.output)["kv_bytes_per_token"]["bf16"] == 131_072
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({k: v for k, v in config.items() if k != "hidden_size"}))
    failed = runner.invoke(app, ["models", "inspect", str(bad)])
    assert failed.exit_code == 1
    assert "/hidden_size" in failed.output


def test_models_pull_saves_the_config_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Hub is replaced by a local fake; no network is used."""
    upstream = (MODELS_DIR / "Qwen--Qwen3-8B.json").read_bytes()
    fetched: list[tuple[str, str | None]] = []

    def fake_download(model_id: str, revision: str | None) -> Path:
        fetched.append((model_id, revision))
        path = tmp_path / "hub" / "config.json"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(upstream)
        return path

    monkeypatch.setattr("servesize.cli.models.download_config", fake_download)
    target = tmp_path / "catalogue"
    result = runner.invoke(app, ["models", "pull", "Qwen/Qwen3-8B", "--to", str(target)])
    assert result.exit_code == 0, result.output
    assert fetched == [("Qwen/Qwen3-8B", None)]
    assert (target / "Qwen--Qwen3-8B.json").read_bytes() == upstream


def test_models_pull_reports_network_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offline(model_id: str, revision: str | None) -> Path:
        raise OSError("network unreachable")

    monkeypatch.setattr("servesize.cli.models.download_config", offline)
    result = runner.invoke(app, ["models", "pull", "Qwen/Qwen3-8B", "--to", str(tmp_path)])
    assert result.exit_code == 1
    assert "network unreachable" in result.output
    assert not list(tmp_path.iterdir())


def test_memory_prints_the_ledger() -> None:
    result = runner.invoke(
        app,
        ["memory", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--json"],
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["kv_bytes_per_token_per_gpu"] == 131_072  # 2 · 32 · 8 · 128 · 2 B
    assert plan["fits"] is True
    table = runner.invoke(
        app,
        ["memory", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"],
        env={"COLUMNS": "200"},
    )
    assert "KV cache pool" in table.output


def test_memory_rejects_impossible_parallelism() -> None:
    result = runner.invoke(
        app, ["memory", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--tp", "3"]
    )
    assert result.exit_code == 1
    assert "/deployment/tensor_parallel_size" in result.output
    unknown = runner.invoke(app, ["memory", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "x"])
    assert unknown.exit_code == 1


def test_kv_calculator_reproduces_the_seed() -> None:
    args = ["kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128"]
    result = runner.invoke(
        app, [*args, "--bytes-per-element", "2", "--concurrency", "4", "--tokens", "4096"]
    )
    assert result.exit_code == 0
    assert "2,147,483,648 B" in result.output  # exactly 2 GiB


def test_perf_prints_step_times() -> None:
    result = runner.invoke(
        app,
        ["perf", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--concurrency", "8"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "TPOT" in result.output
    assert "measured" in result.output  # the shipped H100 kernel tables were used
    refused = runner.invoke(app, ["perf", "--model", "meta-llama/Llama-3.1-405B", "--gpu", "l4"])
    assert refused.exit_code == 1


def test_simulate_open_and_closed_loop() -> None:
    base = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    small = ["--num-requests", "200", "--input-tokens", "256", "--output-tokens", "32"]
    opened = runner.invoke(app, [*base, *small, "--rate", "4"], env={"COLUMNS": "200"})
    assert opened.exit_code == 0, opened.output
    assert "TTFT" in opened.output
    assert "completed 180/180" in opened.output  # 200 requests, the first 10 % are warm-up
    closed = runner.invoke(app, [*base, *small, "--concurrency", "8"], env={"COLUMNS": "200"})
    assert closed.exit_code == 0, closed.output
    assert "closed loop" in closed.output.lower()
    both = runner.invoke(app, [*base, "--rate", "1", "--concurrency", "2"])
    assert both.exit_code == 1
    bad_args = (["--rate", "-1"], ["--rate", "0"], ["--rate", "nan"], ["--concurrency", "0"])
    for bad in (*bad_args, ["--rate", "1", "--seed", "-1"]):
        refused = runner.invoke(app, [*base, *bad])
        assert refused.exit_code == 2, (bad, refused.output)
    too_long = runner.invoke(app, [*base, "--rate", "1", "--input-tokens", "200000"])
    assert too_long.exit_code == 2
    assert "max_model_len" in too_long.output


def test_simulate_runs_the_engines_own_scheduler() -> None:
    base = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    small = ["--num-requests", "100", "--input-tokens", "256", "--output-tokens", "16"]
    for engine in ("sglang", "trtllm"):
        result = runner.invoke(
            app, [*base, *small, "--rate", "2", "--engine", engine], env={"COLUMNS": "200"}
        )
        assert result.exit_code == 0, (engine, result.output)
        assert "completed 90/90" in result.output
    # TensorRT-LLM runs prompts whole: 10,000 tokens exceed its 8192-token budget.
    long = ["--input-tokens", "10000", "--max-model-len", "16384", "--rate", "0.5"]
    refused = runner.invoke(app, [*base, *long, "--engine", "trtllm"], env={"COLUMNS": "200"})
    assert refused.exit_code == 2
    assert "8192" in refused.output
    bad = runner.invoke(app, [*base, "--rate", "1", "--engine", "tgi"])
    assert bad.exit_code != 0


def test_simulate_replays_a_trace_file(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(
            f'{{"timestamp": {250 * k}, "input_length": 256, "output_length": 16}}\n'
            for k in range(40)
        )
    )
    base = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    result = runner.invoke(app, [*base, "--trace", str(trace)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "completed 36/36" in result.output  # 40 requests, the first 10 % are warm-up
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,input_tokens,output_tokens\n1,256,16\n0,256,16\n")
    refused = runner.invoke(app, [*base, "--trace", str(bad)], env={"COLUMNS": "200"})
    assert refused.exit_code == 1
    assert "in order" in refused.output


def test_simulate_replays_azure_and_vllm_files() -> None:
    data = Path(__file__).parent / "data" / "traces"
    base = ["simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    azure = runner.invoke(
        app, [*base, "--trace", str(data / "azure_llm_conv_head.csv")], env={"COLUMNS": "200"}
    )
    assert azure.exit_code == 0, azure.output
    assert "completed 8/8" in azure.output  # 8 requests, a tenth rounds down to no warm-up
    vllm = runner.invoke(
        app, [*base, "--trace", str(data / "vllm_bench_detailed.json")], env={"COLUMNS": "200"}
    )
    assert vllm.exit_code == 0, vllm.output
    assert "completed 4/4" in vllm.output  # the failed request is left out


def test_perf_speculative() -> None:
    base = ["perf", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    result = runner.invoke(
        app,
        [*base, "--speculative", "eagle3", "--acceptance-rate", "0.8"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "E 2.952 tokens/step" in result.output  # 1 + 0.8 + 0.64 + 0.512
    refused = runner.invoke(app, [*base, "--speculative", "mtp"])
    assert refused.exit_code == 1  # Llama-3.1-8B has no MTP layers
    assert "/deployment/speculative/method" in refused.output
