"""llm-d ModelService values: valid under the chart's schema (the transcribed part in
tests/data/llm-d), and the command the chart's ``vllmServe`` template builds from them is the
plan's command (same flags and values), with the GPUs the plan assumed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from servesize.core.deploy import LLMD_CHART_VERSION, llmd_values

SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[2]
        / "data"
        / "llm-d"
        / "modelservice-values-subset.schema.json"
    ).read_text()
)
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
MODEL = "meta-llama/Llama-3.1-70B"
SERVER = (
    "vllm",
    "serve",
    MODEL,
    "--port",
    "8000",
    "--tensor-parallel-size",
    "4",
    "--pipeline-parallel-size",
    "2",
    "--data-parallel-size",
    "1",
    "--max-num-seqs",
    "256",
    "--kv-cache-memory-bytes",
    "40000000000",
    "--kv-cache-dtype",
    "fp8_e4m3",
)


def _chart_command(values: dict[str, Any], role: str) -> list[str]:
    """``llm-d-modelservice.vllmServeModelCommand`` (chart v0.4.12) for a pvc+hf model: the
    model is the last two path segments of the uri; the port is servicePort for prefill or
    with the proxy off, else the proxy's targetPort; TP/DP flags only when > 1."""
    pool = values[role]
    (container,) = pool["containers"]
    assert container["modelCommand"] == "vllmServe"
    segments = values["modelArtifacts"]["uri"].split("://")[1].split("/")
    routing = values["routing"]
    proxied = routing["proxy"]["enabled"] and role == "decode"
    port = routing["proxy"]["targetPort"] if proxied else routing["servicePort"]
    out = ["vllm", "serve", "/".join(segments[-2:]), "--port", str(port)]
    par = pool["parallelism"]
    for flag, key in (
        ("--tensor-parallel-size", "tensor"),
        ("--data-parallel-size", "data"),
        ("--data-parallel-size-local", "dataLocal"),
    ):
        if par[key] > 1:
            out += [flag, str(par[key])]
    return [*out, "--served-model-name", values["modelArtifacts"]["name"], *container["args"]]


def _flags(argv: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """``--flag value`` pairs (None for a bare switch), dropping vLLM's defaults the chart
    leaves out (``--tensor-parallel-size 1``, ``--data-parallel-size 1``) and the chart-added
    ``--served-model-name``."""
    out: dict[str, str | None] = {}
    i = 3
    while i < len(argv):
        flag = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[flag] = argv[i + 1]
            i += 2
        else:
            out[flag] = None
            i += 1
    out.pop("--served-model-name", None)
    for flag in ("--tensor-parallel-size", "--data-parallel-size"):
        if out.get(flag) == "1":
            del out[flag]
    return out


def test_an_aggregated_plan_runs_its_own_command_under_the_chart() -> None:
    values = llmd_values(
        model=MODEL,
        engine="vllm",
        engine_version="0.21.0",
        commands=[("server", SERVER)],
        tensor_parallel=4,
        data_parallel=1,
        gpus_per_replica=8,
        replicas=3,
    )
    assert [e.message for e in VALIDATOR.iter_errors(values)] == []
    assert LLMD_CHART_VERSION == "v0.4.12"
    assert values["decode"]["replicas"] == 3
    assert values["prefill"] == {"create": False, "replicas": 0}
    rebuilt = _chart_command(values, "decode")
    assert rebuilt[:3] == ["vllm", "serve", MODEL]
    assert _flags(rebuilt) == _flags(SERVER)
    # TP 4 × PP 2 = 8 GPUs: set explicitly (the chart alone would request tensor × dataLocal = 4).
    (container,) = values["decode"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert values["routing"]["proxy"]["enabled"] is False


def test_a_disaggregated_plan_gets_both_pools_and_the_sidecar() -> None:
    kv = ("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')
    prefill = (*SERVER, *kv, "--max-num-seqs", "8")
    decode = (*SERVER, *kv)
    values = llmd_values(
        model=MODEL,
        engine="vllm",
        engine_version="0.21.0",
        commands=[("prefill", prefill), ("decode", decode)],
        tensor_parallel=4,
        data_parallel=1,
        gpus_per_replica=8,
        replicas=1,
        prefill_replicas=2,
        decode_replicas=5,
    )
    assert [e.message for e in VALIDATOR.iter_errors(values)] == []
    assert (values["prefill"]["replicas"], values["decode"]["replicas"]) == (2, 5)
    assert values["routing"]["proxy"]["enabled"] is True
    # Decode pods listen behind the sidecar (targetPort 8200), prefill pods on 8000.
    assert _chart_command(values, "decode")[3:5] == ["--port", "8200"]
    assert _chart_command(values, "prefill")[3:5] == ["--port", "8000"]
    assert _flags(_chart_command(values, "prefill")) == _flags(prefill) | {"--port": "8000"}


def test_the_schema_check_can_fail() -> None:
    values = llmd_values(
        model=MODEL,
        engine="vllm",
        engine_version="0.21.0",
        commands=[("server", SERVER)],
        tensor_parallel=4,
        data_parallel=1,
        gpus_per_replica=8,
        replicas=1,
    )
    values["decode"]["parallelism"]["tensr"] = 4
    values["modelArtifacts"]["sizeGi"] = 1
    assert len(list(VALIDATOR.iter_errors(values))) == 2


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"engine": "sglang"}, "runs vLLM"),
        ({"commands": [("node0", SERVER), ("node1", SERVER)]}, "spanning nodes"),
        ({"model": "local-model"}, "org"),
        ({"commands": [("server", ("vllm", "serve", "other/model"))]}, "does not start"),
    ],
)
def test_plans_the_chart_cannot_run_say_why(overrides: dict[str, Any], reason: str) -> None:
    fields: dict[str, Any] = {
        "model": MODEL,
        "engine": "vllm",
        "engine_version": "0.21.0",
        "commands": [("server", SERVER)],
        "tensor_parallel": 4,
        "data_parallel": 1,
        "gpus_per_replica": 8,
        "replicas": 1,
    }
    with pytest.raises(ValueError, match=reason):
        llmd_values(**(fields | overrides))
