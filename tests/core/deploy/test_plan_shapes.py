"""The objects of real launch plans (``launch_plan`` over memory plans, the path sizing takes)
validate against the Kubernetes v1.34 strict schemas of tests/data/k8s, for plans of several
shapes: one GPU, TP8, a 16-GPU replica over two nodes, disaggregated pools with a router, and
TensorRT-LLM with its options file, speculation and a host KV tier. KServe predictors are checked
as core/v1 PodSpecs (no KServe CRD schema is stored)."""

from __future__ import annotations

from typing import Any

import pytest

from servesize.core.deploy import PlanCommand, PlanDeployment, plan_objects
from servesize.core.memory import Deployment, KVOffload, plan_memory
from servesize.core.sizing import LaunchPlan, launch_plan
from servesize.core.speculative import SpeculativeDecoding
from tests.core.deploy.test_plan_objects import POD_SPEC, _check
from tests.core.sizing.fixtures import GPUS, LLAMA_8B

H100 = GPUS["h100-sxm"]
EAGLE = SpeculativeDecoding.of(
    "eagle3", 3, acceptance_rate=0.8, draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
)


def _launch(
    engine: str,
    *,
    tp: int = 1,
    dp: int = 1,
    disaggregated: bool = False,
    spec: SpeculativeDecoding | None = None,
    offload: KVOffload | None = None,
) -> LaunchPlan:
    dep = Deployment(
        engine=engine,
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        max_model_len=4096,
        max_num_batched_tokens=8192,
        kv_offload=offload,
    )
    memory = plan_memory(LLAMA_8B, H100, dep)
    assert memory.fits
    return launch_plan(
        "meta-llama/Llama-3.1-8B",
        memory,
        is_moe=False,
        gpus_per_node=8,
        disaggregated=disaggregated,
        speculative=spec,
    )


def _objects(launch: LaunchPlan, gpus: int, **kw: Any) -> tuple[list[dict[str, Any]], Any]:
    plan = PlanDeployment(
        name="llama-3-1-8b-h100-sxm-1",
        engine=launch.engine,  # type: ignore[arg-type]
        engine_version=launch.engine_version,
        commands=[PlanCommand(role=c.role, argv=c.argv, files=c.files) for c in launch.commands],
        gpus_per_replica=gpus,
        replicas=2,
        gpus_per_node=8,
        **kw,
    )
    objects = plan_objects(plan)
    return objects.kubernetes, objects


def _gpus(obj: dict[str, Any]) -> list[str]:
    if obj["kind"] == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        pods = [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    elif obj["kind"] == "Deployment":
        pods = [obj["spec"]["template"]["spec"]]
    else:
        return []
    limits = [c.get("resources", {}).get("limits", {}) for p in pods for c in p["containers"]]
    return [lim.get("nvidia.com/gpu", "0") for lim in limits]


SHAPES: dict[str, tuple[dict[str, Any], int, list[str], list[str]]] = {
    "1 GPU vLLM": ({"engine": "vllm"}, 1, ["Service", "Deployment"], ["1"]),
    "TP8 vLLM": ({"engine": "vllm", "tp": 8, "spec": EAGLE}, 8, ["Service", "Deployment"], ["8"]),
    "16-GPU TP8 x DP2 vLLM over 2 nodes": (
        {"engine": "vllm", "tp": 8, "dp": 2, "offload": KVOffload(size_gib=64)},
        16,
        ["Service", "LeaderWorkerSet"],
        ["8", "8"],
    ),
    "disaggregated SGLang": (
        {"engine": "sglang", "disaggregated": True, "spec": EAGLE},
        1,
        ["Service", "Deployment", "Service", "Deployment", "Service", "Deployment"],
        ["1", "1", "0"],
    ),
    "TP2 TensorRT-LLM with options file": (
        {
            "engine": "trtllm",
            "tp": 2,
            "spec": EAGLE,
            "offload": KVOffload(host_cache_size_bytes=16 * 2**30),
        },
        2,
        ["ConfigMap", "Service", "Deployment"],
        ["2"],
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_objects_of_every_plan_shape_validate(shape: str) -> None:
    knobs, gpus, kinds, gpu_limits = SHAPES[shape]
    launch = _launch(**knobs)
    objects, _ = _objects(launch, gpus)
    assert [o["kind"] for o in objects] == kinds
    for obj in objects:
        assert _check(obj) == [], (obj["kind"], _check(obj))
    assert [g for o in objects for g in _gpus(o)] == gpu_limits


def test_the_command_in_the_pod_is_the_planned_one_with_its_knobs() -> None:
    """The speculative JSON and the host tier travel into the container args unchanged."""
    launch = _launch("vllm", tp=8, spec=EAGLE, offload=KVOffload(size_gib=32))
    objects, _ = _objects(launch, 8)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = [*container["command"], *container["args"]]
    at = argv.index("--speculative-config")
    assert argv[at + 1] == (
        '{"method":"eagle3","num_speculative_tokens":3,'
        '"model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}'
    )
    assert argv[argv.index("--kv-offloading-size") + 1] == "32"


def test_kserve_predictors_are_pod_specs() -> None:
    for knobs, gpus in (({"engine": "vllm"}, 1), ({"engine": "vllm", "tp": 8}, 8)):
        _, objects = _objects(_launch(**knobs), gpus)
        assert objects.kserve
        for isvc in objects.kserve:
            predictor = isvc["spec"]["predictor"]
            pod = {k: v for k, v in predictor.items() if k in ("containers", "volumes")}
            assert [e.message for e in POD_SPEC.iter_errors(pod)] == []
            limits = predictor["containers"][0]["resources"]["limits"]
            assert limits["nvidia.com/gpu"] == str(gpus)
