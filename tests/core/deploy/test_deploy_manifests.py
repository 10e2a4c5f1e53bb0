"""Deployment objects validate against the Kubernetes v1.34 JSON schemas (tests/data/k8s), and
carry the plan's command, GPUs, ``/dev/shm`` and health probes; the benchmark job parses under
``vllm bench serve``'s own options (tests/data/vllm)."""

from __future__ import annotations

import argparse
import json
import math
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from servesize.core.deploy import (
    BenchmarkJob,
    DeploySpec,
    ModelCache,
    benchmark_script,
    deployment_objects,
    kserve_inference_service,
    resource_name,
    vllm_bench_command,
)

DATA = Path(__file__).resolve().parents[2] / "data"
K8S = DATA / "k8s" / "v1.34.0-local-strict"
VLLM_CMD = ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--tensor-parallel-size", "2"]


def _validator(name: str) -> jsonschema.protocols.Validator:
    definitions = json.loads((K8S / "_definitions.json").read_text())
    registry: Registry[Any] = Registry().with_resource(
        definitions["$id"], Resource.from_contents(definitions)
    )
    schema = json.loads((K8S / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry)


DEPLOYMENT = _validator("deployment-apps-v1.json")
SERVICE = _validator("service-v1.json")


def _spec(**overrides: Any) -> DeploySpec:
    fields: dict[str, Any] = {
        "name": "Llama-3.1-8B h100-sxm",
        "engine": "vllm",
        "command": VLLM_CMD,
        "gpus_per_replica": 2,
        "replicas": 3,
        "engine_version": "0.21.0",
    }
    fields.update(overrides)
    return DeploySpec(**fields)


def _errors(validator: jsonschema.protocols.Validator, obj: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]


@pytest.mark.parametrize(
    ("engine", "command", "port"),
    [
        ("vllm", VLLM_CMD, 8000),
        ("sglang", ["sglang", "serve", "--model-path", "m/x", "--tp-size", "2"], 30000),
        ("trtllm", ["trtllm-serve", "m/x", "--tp_size", "2"], 8000),
    ],
)
def test_objects_validate_against_the_kubernetes_schemas(
    engine: str, command: list[str], port: int
) -> None:
    service, deployment = deployment_objects(_spec(engine=engine, command=command))
    assert _errors(SERVICE, service) == []
    assert _errors(DEPLOYMENT, deployment) == []
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # The planned command verbatim, then the pod's bind address and the engine's default port.
    assert [*container["command"], *container["args"]] == [
        *command,
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
    ]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": port}
    assert service["spec"]["ports"][0]["port"] == port


def test_gpus_shm_cache_and_replicas_follow_the_plan() -> None:
    _, deployment = deployment_objects(_spec())
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["resources"] == {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert volumes["model-cache"]["persistentVolumeClaim"] == {"claimName": "model-cache"}
    assert {"name": "HF_HOME", "value": "/models"} in container["env"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"dshm": "/dev/shm", "model-cache": "/models"}
    # 180 failures × 10 s: 30 minutes to download and load the weights before liveness applies.
    startup = container["startupProbe"]
    assert startup["failureThreshold"] * startup["periodSeconds"] == 1800
    one_gpu = deployment_objects(_spec(gpus_per_replica=1))[1]["spec"]["template"]["spec"]
    assert one_gpu["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi"


def test_a_host_path_cache_and_a_namespace_validate() -> None:
    spec = _spec(model_cache=ModelCache(claim_name=None, host_path="/mnt/hf"), namespace="llm")
    service, deployment = deployment_objects(spec)
    assert _errors(DEPLOYMENT, deployment) == []
    assert deployment["metadata"]["namespace"] == service["metadata"]["namespace"] == "llm"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"][1]["hostPath"] == {"path": "/mnt/hf", "type": "DirectoryOrCreate"}


def test_the_schema_check_can_fail() -> None:
    """The strict schema rejects a misspelt field and a wrongly typed one, so a passing
    validation above means something."""
    _, deployment = deployment_objects(_spec())
    bad = json.loads(json.dumps(deployment))
    bad["spec"]["replica"] = 3
    bad["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
    errors = _errors(DEPLOYMENT, bad)
    assert len(errors) == 2, errors


def test_disaggregated_pools_get_their_own_names() -> None:
    prefill = _spec(role="prefill").object_name
    decode = _spec(role="decode").object_name
    assert (prefill, decode) == ("llama-3-1-8b-h100-sxm-prefill", "llama-3-1-8b-h100-sxm-decode")
    assert resource_name("A" * 80) == "a" * 63


def test_kserve_inference_service_runs_the_same_container() -> None:
    isvc = kserve_inference_service(_spec())
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    predictor = isvc["spec"]["predictor"]
    assert predictor["minReplicas"] == predictor["maxReplicas"] == 3
    container = predictor["containers"][0]
    assert container["name"] == "kserve-container"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    # The pod part is a core/v1 PodSpec: validate it against its definition.
    definitions = json.loads((K8S / "_definitions.json").read_text())
    pod_schema = {
        "$ref": "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.api.core.v1.PodSpec"
    }
    registry: Registry[Any] = Registry().with_resource(
        definitions["$id"], Resource.from_contents(definitions)
    )
    pod = {k: v for k, v in predictor.items() if k in ("containers", "volumes", "tolerations")}
    validator = jsonschema.Draft202012Validator(pod_schema, registry=registry)
    assert [e.message for e in validator.iter_errors(pod)] == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"gpus_per_replica": 16}, "gpus_per_replica"),
        ({"engine": "tgi"}, "engine"),
        ({"command": []}, "command"),
        ({"port": 70000}, "port"),
        ({"command": [*VLLM_CMD, "--port", "9000"]}, "port"),
    ],
)
def test_specs_a_deployment_cannot_express_are_refused(
    overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        deployment_objects(_spec(**overrides))


def _vllm_bench_parser() -> argparse.ArgumentParser:
    """An argparse parser with the snapshot of ``vllm bench serve``'s options."""
    snapshot = json.loads((DATA / "vllm" / "bench_serve_options.json").read_text())
    parser = argparse.ArgumentParser(exit_on_error=False, allow_abbrev=False)
    types = {"int": int, "float": float, "str": str}
    for flag, option in snapshot["options"].items():
        if option["type"] == "store_true":
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(
                flag,
                type=types[option["type"]],
                choices=option.get("choices"),
                nargs=option.get("nargs"),
            )
    return parser


def test_the_benchmark_command_parses_under_vllm_bench_serve() -> None:
    job = BenchmarkJob(
        model="meta-llama/Llama-3.1-8B",
        base_url="http://svc:8000",
        rate_per_s=8.0,
        input_tokens=512,
        output_tokens=128,
        duration_s=300.0,
        cv=2.0,
    )
    argv = vllm_bench_command(job)
    assert argv[:3] == ["vllm", "bench", "serve"]
    args = _vllm_bench_parser().parse_args(argv[3:])
    assert args.request_rate == 8.0
    assert args.num_prompts == 2400  # 8 requests/s × 300 s
    assert args.num_warmups == 240  # 30 s of the planned rate
    assert args.burstiness == 0.25  # gamma shape 1 / cv² with cv = 2
    assert (args.random_input_len, args.random_output_len) == (512, 128)
    assert args.ignore_eos
    assert args.save_result
    # Every percentile ``servesize-agent ingest --format vllm-bench`` reads is written.
    assert set(args.percentile_metrics.split(",")) == {"ttft", "tpot", "itl", "e2el"}
    assert set(args.metric_percentiles.split(",")) == {"50", "90", "95", "99"}
    assert args.dataset_name == "random"
    script = benchmark_script(job, plan_ref="plan 1")
    assert script.startswith("#!/bin/sh\n")
    bench_line = next(i for i, line in enumerate(script.splitlines()) if "vllm bench" in line)
    continued = script.splitlines()[bench_line:]
    end = next(i for i, line in enumerate(continued) if not line.endswith("\\"))
    words = shlex.split(" ".join(line.rstrip("\\") for line in continued[: end + 1]))
    assert words[words.index("--base-url") + 1] == "$BASE_URL"
    assert "servesize-agent ingest --format vllm-bench" in script


def test_benchmark_jobs_refuse_bad_loads() -> None:
    with pytest.raises(ValueError, match="rate_per_s"):
        BenchmarkJob(
            model="m", base_url="http://x", rate_per_s=math.inf, input_tokens=1, output_tokens=1
        )
    with pytest.raises(ValueError, match="base_url"):
        BenchmarkJob(model="m", base_url="svc:8000", rate_per_s=1, input_tokens=1, output_tokens=1)
