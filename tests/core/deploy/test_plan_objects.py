"""A plan's objects from its launch commands: TensorRT-LLM's YAML as a ConfigMap mounted where
the argv reads it (v1 ConfigMap strict schema), multi-node replicas as LeaderWorkerSets (pod
templates checked against core/v1 PodSpec: no LWS schema is stored), routers as their own
Deployment + Service with the pools' addresses substituted."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from servesize.core.deploy import LWS_API_VERSION, PlanCommand, PlanDeployment, plan_objects
from tests.core.deploy.test_deploy_manifests import DEPLOYMENT, K8S, SERVICE, _errors, _validator

CONFIG_MAP = _validator("configmap-v1.json")
_DEFS = json.loads((K8S / "_definitions.json").read_text())
POD_SPEC = jsonschema.Draft202012Validator(
    {"$ref": f"{_DEFS['$id']}#/$defs/io.k8s.api.core.v1.PodSpec"},
    registry=Registry().with_resource(_DEFS["$id"], Resource.from_contents(_DEFS)),
)
YAML = "max_batch_size: 64\nkv_cache_config:\n  max_tokens: 100000\n"
TRT = (
    "trtllm-serve",
    "m/x",
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
    "--tp_size",
    "2",
    "--extra_llm_api_options",
    "extra_llm_api_options.yaml",
)


def _plan(commands: list[PlanCommand], **overrides: Any) -> PlanDeployment:
    fields: dict[str, Any] = {
        "name": "x-h100",
        "engine": "vllm",
        "engine_version": "0.21.0",
        "commands": commands,
        "gpus_per_replica": 2,
        "replicas": 3,
    }
    fields.update(overrides)
    return PlanDeployment(**fields)


def _check(obj: dict[str, Any]) -> list[str]:
    kind = obj["kind"]
    if kind == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        return [
            *_errors(POD_SPEC, lwt["leaderTemplate"]["spec"]),
            *_errors(POD_SPEC, lwt["workerTemplate"]["spec"]),
        ]
    validator = {"ConfigMap": CONFIG_MAP, "Service": SERVICE, "Deployment": DEPLOYMENT}[kind]
    return _errors(validator, obj)


def test_trtllm_options_file_is_a_config_map_mounted_where_the_argv_reads_it() -> None:
    files = (("extra_llm_api_options.yaml", YAML),)
    out = plan_objects(_plan([PlanCommand(role="server", argv=TRT, files=files)], engine="trtllm"))
    assert [o["kind"] for o in out.kubernetes] == ["ConfigMap", "Service", "Deployment"]
    for obj in out.kubernetes:
        assert _check(obj) == []
    cm, _, deployment = out.kubernetes
    assert cm["data"] == {"extra_llm_api_options.yaml": YAML}
    pod = deployment["spec"]["template"]["spec"]
    (engine,) = pod["containers"]
    args = engine["args"]
    path = args[args.index("--extra_llm_api_options") + 1]
    mount = next(m for m in engine["volumeMounts"] if m["name"] == "config")
    volume = next(v for v in pod["volumes"] if v["name"] == "config")
    # The argv names <mountPath>/<key> of the ConfigMap the volume refers to.
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    assert path == f"{mount['mountPath']}/extra_llm_api_options.yaml"
    assert mount["readOnly"] is True
    # The ConfigMap schema is strict: a misspelt field fails, so the pass above means something.
    assert _check({**cm, "datas": {}}) != []


def test_a_dense_trtllm_copy_per_gpu_set_becomes_one_pod_each() -> None:
    copies = [
        PlanCommand(
            role=f"server{k}",
            argv=(
                "env",
                f"CUDA_VISIBLE_DEVICES={2 * k},{2 * k + 1}",
                *TRT[:5],
                str(8000 + k),
                *TRT[6:],
            ),
            files=(("extra_llm_api_options.yaml", YAML),),
        )
        for k in range(2)
    ]
    out = plan_objects(_plan(copies, engine="trtllm", gpus_per_replica=4, replicas=3))
    deployment = out.kubernetes[-1]
    # 3 replicas × 2 copies, 4 GPUs per replica / 2 copies = 2 GPUs per pod, default port.
    assert deployment["spec"]["replicas"] == 6
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    assert engine["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert engine["command"] == ["trtllm-serve"]
    assert engine["args"][engine["args"].index("--port") + 1] == "8000"


VLLM_NODE0 = (
    "vllm",
    "serve",
    "m/x",
    "--tensor-parallel-size",
    "8",
    "--data-parallel-size",
    "2",
    "--data-parallel-size-local",
    "1",
    "--data-parallel-address",
    "$MASTER_ADDR",
    "--data-parallel-rpc-port",
    "13345",
)
VLLM_NODE1 = (*VLLM_NODE0, "--data-parallel-start-rank", "1", "--headless")


def test_a_two_node_replica_is_a_leader_worker_set() -> None:
    nodes = [
        PlanCommand(role="node0", argv=VLLM_NODE0),
        PlanCommand(role="node1", argv=VLLM_NODE1),
    ]
    out = plan_objects(_plan(nodes, gpus_per_replica=16, replicas=2))
    assert [o["kind"] for o in out.kubernetes] == ["Service", "LeaderWorkerSet"]
    for obj in out.kubernetes:
        assert _check(obj) == []
    svc, lws = out.kubernetes
    assert lws["apiVersion"] == LWS_API_VERSION
    assert lws["spec"]["replicas"] == 2
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    # The Service reaches the leaders only (worker index 0), which serve HTTP.
    assert svc["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    leader = lwt["leaderTemplate"]["spec"]["containers"][0]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    # 16 GPUs over 2 nodes: 8 per pod.
    assert leader["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert leader["command"] == worker["command"] == ["/bin/sh", "-c"]
    script = shlex.split(leader["args"][0])
    assert script[0] == "exec"
    # $MASTER_ADDR becomes the leader address LWS sets; the shell expands it (not quoted away).
    assert script[1 + VLLM_NODE0.index("--data-parallel-address") + 1] == "$LWS_LEADER_ADDRESS"
    assert '"$LWS_LEADER_ADDRESS"' in leader["args"][0]
    assert list(script[1 : 1 + len(VLLM_NODE0)]) != list(VLLM_NODE0)
    assert "startupProbe" in leader
    assert "startupProbe" not in worker  # headless vLLM serves no HTTP
    assert worker["args"][0].startswith('case "$LWS_WORKER_INDEX" in 1) exec vllm serve')
    assert "--data-parallel-start-rank 1 --headless" in worker["args"][0]


def test_a_router_over_independent_node_servers_lists_every_pod() -> None:
    sglang = ("sglang", "serve", "--model-path", "m/x", "--dp-size", "8")
    router = (
        "python",
        "-m",
        "sglang_router.launch_router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--worker-urls",
        "http://$NODE0_ADDR:30000",
        "http://$NODE1_ADDR:30000",
    )
    commands = [
        PlanCommand(role="node0", argv=sglang),
        PlanCommand(role="node1", argv=sglang),
        PlanCommand(role="router", argv=router),
    ]
    out = plan_objects(_plan(commands, engine="sglang", gpus_per_replica=16, replicas=2))
    kinds = [o["kind"] for o in out.kubernetes]
    assert kinds == ["Service", "LeaderWorkerSet", "Service", "Deployment"]
    for obj in out.kubernetes:
        assert _check(obj) == []
    lws = out.kubernetes[1]
    name = lws["metadata"]["name"]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert "startupProbe" in worker  # each node is a server of its own
    deployment = out.kubernetes[3]
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    args = engine["args"]
    urls = args[args.index("--worker-urls") + 1 : args.index("--worker-urls") + 5]
    # 2 groups × 2 pods: leader <lws>-<g>, worker <lws>-<g>-1, under the headless Service <lws>.
    assert urls == [
        f"http://{name}-0.{name}:30000",
        f"http://{name}-1.{name}:30000",
        f"http://{name}-0-1.{name}:30000",
        f"http://{name}-1-1.{name}:30000",
    ]
    assert engine["resources"] == {}
    assert deployment["spec"]["replicas"] == 1
    assert out.entry_service == deployment["metadata"]["name"]
    assert out.entry_port == 8000


def test_a_disaggregated_plan_gets_both_pools_and_the_router_with_their_addresses() -> None:
    pool = ("sglang", "serve", "--model-path", "m/x")
    router = (
        "python",
        "-m",
        "sglang_router.launch_router",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--pd-disaggregation",
        "--prefill",
        "http://$PREFILL_ADDR:30000",
        "8998",
        "--decode",
        "http://$DECODE_ADDR:30000",
    )
    commands = [
        PlanCommand(role="prefill", argv=(*pool, "--disaggregation-mode", "prefill")),
        PlanCommand(role="decode", argv=(*pool, "--disaggregation-mode", "decode")),
        PlanCommand(role="router", argv=router),
    ]
    out = plan_objects(
        _plan(commands, engine="sglang", prefill_replicas=2, decode_replicas=5, gpus_per_replica=1)
    )
    assert [o["kind"] for o in out.kubernetes] == ["Service", "Deployment"] * 3
    for obj in out.kubernetes:
        assert _check(obj) == []
    prefill, decode, routed = out.kubernetes[1], out.kubernetes[3], out.kubernetes[5]
    assert (prefill["spec"]["replicas"], decode["spec"]["replicas"]) == (2, 5)
    args = routed["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"http://{prefill['metadata']['name']}:30000" in args
    assert f"http://{decode['metadata']['name']}:30000" in args
    assert out.entry_service == routed["metadata"]["name"]


def test_one_mpirun_job_across_nodes_is_refused_with_its_reason() -> None:
    argv = ("mpirun", "-np", "16", "-H", "$NODE0_ADDR:8,$NODE1_ADDR:8", "trtllm-llmapi-launch")
    with pytest.raises(ValueError, match="mpirun"):
        plan_objects(_plan([PlanCommand(role="server", argv=argv)], engine="trtllm"))
    with pytest.raises(ValueError, match="no vllm launch command"):
        plan_objects(_plan([]))


def test_the_pod_scripts_run_each_nodes_command_with_the_leader_address(tmp_path: Path) -> None:
    """Run the leader's and worker's ``sh -c`` scripts with a stand-in ``vllm`` that prints its
    arguments: node k's argv arrives intact (a JSON argument included), ``$MASTER_ADDR``
    replaced by the address LWS sets."""
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    nodes = [
        PlanCommand(role="node0", argv=(*VLLM_NODE0, "--kv-transfer-config", kv)),
        PlanCommand(role="node1", argv=(*VLLM_NODE1, "--kv-transfer-config", kv)),
    ]
    lws = plan_objects(_plan(nodes, gpus_per_replica=16, replicas=1)).kubernetes[1]
    fake = tmp_path / "vllm"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "LWS_LEADER_ADDRESS": "lws-0.lws.ns"}
    lwt = lws["spec"]["leaderWorkerTemplate"]
    for template, index, node in (
        ("leaderTemplate", "0", nodes[0]),
        ("workerTemplate", "1", nodes[1]),
    ):
        c = lwt[template]["spec"]["containers"][0]
        run = subprocess.run(
            [*c["command"], *c["args"]],
            env=env | {"LWS_WORKER_INDEX": index},
            capture_output=True,
            text=True,
            check=True,
        )
        expected = [a.replace("$MASTER_ADDR", "lws-0.lws.ns") for a in node.argv[1:]]
        # Then the pod's bind address and vLLM's default port, added as for every pod.
        assert run.stdout.splitlines() == [*expected, "--host", "0.0.0.0", "--port", "8000"]
    # A worker index without a node exits non-zero rather than idling.
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    bad = subprocess.run(
        [*worker["command"], *worker["args"]], env=env | {"LWS_WORKER_INDEX": "5"}, check=False
    )
    assert bad.returncode == 1
