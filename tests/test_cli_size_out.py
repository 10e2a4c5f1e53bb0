"""``servesize size --out DIR``: per plan its JSON, commands, manifests (YAML that parses to
objects valid under the Kubernetes v1.34 schemas) and a benchmark script."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml
from typer.testing import CliRunner

from servesize.cli import app
from servesize.cli.size_out import dump_yaml
from tests.core.deploy.test_deploy_manifests import DEPLOYMENT, SERVICE, _errors
from tests.core.deploy.test_llmd_values import _chart_command, _flags
from tests.core.deploy.test_plan_objects import CONFIG_MAP

PRICES = Path(__file__).resolve().parent.parent / "servesize" / "data" / "prices.json"


def test_yaml_round_trips_through_a_yaml_parser() -> None:
    doc = {
        "a": [1, 2.5, True, None, "null", "x: y", 'q"uote', "ünï"],
        "nvidia.com/gpu": "2",
        "yes": {},
        "e": [],
        "nested": [{"k": [{"z": 1}], "l": "v"}],
    }
    assert list(yaml.safe_load_all(dump_yaml([doc, {"b": 1}]))) == [doc, {"b": 1}]


def test_out_writes_commands_manifests_and_a_benchmark_per_plan(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "size",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--rate",
            "4",
            "--slo",
            "ttft_p95=2s,tpot_p95=100ms",
            "--gpu",
            "h100-sxm",
            "--tp",
            "1",
            "--verify-top",
            "0",
            "--out",
            str(tmp_path),
        ],
        env={"COLUMNS": "250"},
    )
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan-1.json").read_text())
    # No --price: the reference sheet's cheapest H100 SXM row.
    rows = [r for r in json.loads(PRICES.read_text())["entries"] if r["gpu"] == "h100-sxm"]
    cheapest = min(r["usd_per_gpu_hour"] for r in rows)
    assert plan["price_per_gpu_hour"] == cheapest
    assert plan["price_source"]["origin"] == "sheet"
    assert math.isclose(plan["cost_per_hour"], cheapest * plan["total_gpus"])
    service, deployment = yaml.safe_load_all((tmp_path / "plan-1.k8s.yaml").read_text())
    assert _errors(SERVICE, service) == []
    assert _errors(DEPLOYMENT, deployment) == []
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    command = plan["commands"]["both"]
    assert [*container["command"], *container["args"]][: len(command)] == command
    assert (tmp_path / "plan-1.command.sh").read_text().splitlines()[2].startswith("vllm serve")
    (isvc,) = yaml.safe_load_all((tmp_path / "plan-1.kserve.yaml").read_text())
    assert isvc["kind"] == "InferenceService"
    (values,) = yaml.safe_load_all((tmp_path / "plan-1.llmd-values.yaml").read_text())
    assert plan["llmd_values"] == "llm-d-modelservice v0.4.12"
    rebuilt = _chart_command(values, "decode")
    assert _flags(rebuilt) == _flags(command)
    bench = (tmp_path / "plan-1.bench.sh").read_text()
    assert "--request-rate 4 " in bench
    assert "--num-prompts 1200 " in bench
    assert "--random-input-len 1024 " in bench
    assert "--random-output-len 256 " in bench


def test_out_puts_a_trtllm_options_file_in_a_config_map(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "size",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--rate",
            "4",
            "--slo",
            "ttft_p95=2s,tpot_p95=100ms",
            "--gpu",
            "h100-sxm",
            "--tp",
            "1",
            "--engine",
            "trtllm",
            "--verify-top",
            "0",
            "--out",
            str(tmp_path),
        ],
        env={"COLUMNS": "250"},
    )
    assert result.exit_code == 0, result.output
    written = (tmp_path / "plan-1.extra_llm_api_options.yaml").read_text()
    cm, service, deployment = yaml.safe_load_all((tmp_path / "plan-1.k8s.yaml").read_text())
    assert _errors(CONFIG_MAP, cm) == []
    assert _errors(SERVICE, service) == []
    assert _errors(DEPLOYMENT, deployment) == []
    assert cm["data"] == {"extra_llm_api_options.yaml": written}
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--extra_llm_api_options") + 1] == (
        "/etc/servesize/extra_llm_api_options.yaml"
    )
    assert not (tmp_path / "plan-1.llmd-values.yaml").exists()
    assert "runs vLLM" in json.loads((tmp_path / "plan-1.json").read_text())["llmd_values"]
