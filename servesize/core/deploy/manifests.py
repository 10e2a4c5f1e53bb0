"""Kubernetes objects for one planned deployment, as plain dicts (no YAML, no IO).

One pool of identical replicas is one ``apps/v1`` Deployment (one pod per replica, the pod
holding every GPU of the replica) and one ``v1`` Service in front of it. A disaggregated plan
is two pools (``prefill``, ``decode``); the router that pairs them is not part of these objects.

Field names follow the Kubernetes API (``io.k8s.api.apps.v1.DeploymentSpec``,
``io.k8s.api.core.v1.Container``, ``Probe``, ``EmptyDirVolumeSource``); the tests validate the
output against the v1.34 JSON schemas. Engine facts mirrored:

- health endpoint ``GET /health``: vLLM ``vllm/entrypoints/openai/api_server.py: health``,
  SGLang ``python/sglang/srt/entrypoints/http_server.py: health``, TensorRT-LLM
  ``tensorrt_llm/serve/openai_server.py: health``;
- default ports: vLLM and ``trtllm-serve`` 8000, SGLang 30000; SGLang and ``trtllm-serve`` bind
  ``127.0.0.1``/``localhost`` unless given ``--host``, so a pod gets ``--host 0.0.0.0``;
- model weights download into ``$HF_HOME`` (``huggingface_hub``), here a mounted cache volume.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ENGINE_IMAGES",
    "ENGINE_PORTS",
    "HEALTH_PATH",
    "DeploySpec",
    "ModelCache",
    "deployment_objects",
    "kserve_inference_service",
    "resource_name",
    "shm_bytes_for",
]

Engine = Literal["vllm", "sglang", "trtllm"]
HEALTH_PATH = "/health"
ENGINE_PORTS: dict[str, int] = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}
ENGINE_IMAGES: dict[str, str] = {
    "vllm": "vllm/vllm-openai:v{version}",
    "sglang": "lmsysorg/sglang:v{version}-cu126",
    "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:{version}",
}
"""Published images per engine (Docker Hub ``vllm/vllm-openai``, ``lmsysorg/sglang``, NGC
``tensorrt-llm/release``), formatted with the plan's engine version."""
GIB = 2**30
SHM_SINGLE_GPU_BYTES = 2 * GIB
"""``/dev/shm`` for a one-GPU pod: vLLM's Kubernetes guide mounts a 2 GiB Memory emptyDir."""
SHM_MULTI_GPU_BYTES = 16 * GIB
"""``/dev/shm`` for a pod whose GPUs talk: NCCL's shared-memory transport and the engines'
multiprocess executors place their buffers there (Docker's 64 MiB default breaks them)."""
STARTUP_PERIOD_S = 10
STARTUP_FAILURES = 180
"""Start-up probe allowance: 180 × 10 s = 30 min for the weights download, load and CUDA graphs."""
_NAME = re.compile(r"[^a-z0-9-]+")


def resource_name(text: str, *, limit: int = 63) -> str:
    """An RFC 1123 label from ``text``: lower case, ``[a-z0-9-]``, at most ``limit`` chars."""
    name = _NAME.sub("-", text.lower()).strip("-")
    name = re.sub("-{2,}", "-", name)[:limit].strip("-")
    if not name:
        raise ValueError(f"name: {text!r} has no character usable in a Kubernetes name")
    return name


def shm_bytes_for(gpus_per_pod: int) -> int:
    """``/dev/shm`` size of a pod: 2 GiB with one GPU, 16 GiB with several."""
    return SHM_SINGLE_GPU_BYTES if gpus_per_pod <= 1 else SHM_MULTI_GPU_BYTES


@dataclass(frozen=True, slots=True)
class ModelCache:
    """Where ``$HF_HOME`` lives: a PersistentVolumeClaim (default) or a node directory."""

    claim_name: str | None = "model-cache"
    host_path: str | None = None
    mount_path: str = "/models"

    def __post_init__(self) -> None:
        if (self.claim_name is None) == (self.host_path is None):
            raise ValueError("model_cache: give exactly one of claim_name or host_path")
        if not self.mount_path.startswith("/"):
            raise ValueError(f"model_cache: mount_path {self.mount_path!r} must be absolute")


@dataclass(frozen=True, slots=True)
class DeploySpec:
    """One pool of identical replicas: the engine command and what the pod needs to run it."""

    name: str
    """Base name of the objects (made a valid label by :func:`resource_name`)."""
    engine: Engine
    command: Sequence[str]
    """The launch command exactly as planned (``vllm serve MODEL ...``)."""
    gpus_per_replica: int
    replicas: int
    engine_version: str
    gpus_per_node: int = 8
    role: str = "both"
    image: str | None = None
    """Container image; default :data:`ENGINE_IMAGES` at ``engine_version``."""
    port: int | None = None
    model_cache: ModelCache = field(default_factory=ModelCache)
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_PORTS:
            raise ValueError(f"engine: {self.engine!r} is not one of {', '.join(ENGINE_PORTS)}")
        if len(self.command) < 1 or not all(isinstance(a, str) and a for a in self.command):
            raise ValueError("command: must be a non-empty list of non-empty strings")
        if self.gpus_per_replica < 1 or self.replicas < 1:
            raise ValueError("gpus_per_replica and replicas must be >= 1")
        if self.gpus_per_replica > self.gpus_per_node:
            raise ValueError(
                f"gpus_per_replica: {self.gpus_per_replica} GPUs exceed one node's "
                f"{self.gpus_per_node}; a multi-node replica needs one pod per node "
                "(e.g. a LeaderWorkerSet), which a Deployment cannot express"
            )
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ValueError(f"port: {self.port} is not in 1..65535")

    @property
    def container_port(self) -> int:
        return self.port if self.port is not None else ENGINE_PORTS[self.engine]

    @property
    def object_name(self) -> str:
        suffix = "" if self.role == "both" else f"-{self.role}"
        return resource_name(self.name, limit=63 - len(suffix)) + suffix


def _argv(spec: DeploySpec) -> list[str]:
    """The planned command with ``--host 0.0.0.0`` and ``--port`` added when absent."""
    argv = list(spec.command)
    if "--host" not in argv:
        argv += ["--host", "0.0.0.0"]
    if "--port" not in argv:
        argv += ["--port", str(spec.container_port)]
    else:
        given = argv[argv.index("--port") + 1 : argv.index("--port") + 2]
        if given != [str(spec.container_port)]:
            raise ValueError(f"port: the command serves on --port {given}, not {spec.port}")
    return argv


def _probe(port: int, *, period_s: int, failures: int, timeout_s: int = 5) -> dict[str, Any]:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": port},
        "periodSeconds": period_s,
        "timeoutSeconds": timeout_s,
        "failureThreshold": failures,
    }


def _labels(spec: DeploySpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": spec.object_name,
        "app.kubernetes.io/component": spec.role,
        "app.kubernetes.io/managed-by": "servesize",
        **spec.labels,
    }


def _metadata(spec: DeploySpec) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": spec.object_name, "labels": _labels(spec)}
    if spec.namespace is not None:
        meta["namespace"] = resource_name(spec.namespace)
    return meta


def _cache_volume(cache: ModelCache) -> dict[str, Any]:
    if cache.claim_name is not None:
        return {
            "name": "model-cache",
            "persistentVolumeClaim": {"claimName": resource_name(cache.claim_name)},
        }
    return {
        "name": "model-cache",
        "hostPath": {"path": cache.host_path, "type": "DirectoryOrCreate"},
    }


def _container(spec: DeploySpec) -> dict[str, Any]:
    argv = _argv(spec)
    port = spec.container_port
    gpus = str(spec.gpus_per_replica)
    env = {"HF_HOME": spec.model_cache.mount_path, **spec.env}
    return {
        "name": "engine",
        "image": spec.image or ENGINE_IMAGES[spec.engine].format(version=spec.engine_version),
        "command": argv[:1],
        "args": argv[1:],
        "env": [
            *[{"name": k, "value": v} for k, v in env.items()],
            {
                "name": "HF_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}
                },
            },
        ],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
        "startupProbe": _probe(port, period_s=STARTUP_PERIOD_S, failures=STARTUP_FAILURES),
        "readinessProbe": _probe(port, period_s=5, failures=3),
        "livenessProbe": _probe(port, period_s=10, failures=3),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "model-cache", "mountPath": spec.model_cache.mount_path},
        ],
    }


def _deployment(spec: DeploySpec) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": spec.object_name}
    shm = shm_bytes_for(spec.gpus_per_replica)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(spec),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector},
            # A replacement pod needs GPUs the old one holds: stop it first.
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": _labels(spec)},
                "spec": {
                    "containers": [_container(spec)],
                    "volumes": [
                        {
                            "name": "dshm",
                            "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm // GIB}Gi"},
                        },
                        _cache_volume(spec.model_cache),
                    ],
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                },
            },
        },
    }


def _service(spec: DeploySpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec),
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": spec.object_name},
            "ports": [
                {
                    "name": "http",
                    "port": spec.container_port,
                    "targetPort": "http",
                    "protocol": "TCP",
                }
            ],
        },
    }


def deployment_objects(spec: DeploySpec) -> list[dict[str, Any]]:
    """The pool's ``Deployment`` and ``Service``, in apply order (Service first)."""
    return [_service(spec), _deployment(spec)]


def kserve_inference_service(spec: DeploySpec) -> dict[str, Any]:
    """A KServe ``serving.kserve.io/v1beta1`` InferenceService running the same container as a
    custom predictor (``spec.predictor.containers``), ``minReplicas = maxReplicas = replicas``
    (the plan's fleet, no autoscaling), with the same probes, ``/dev/shm`` and cache volume."""
    deployment = _deployment(spec)
    pod = deployment["spec"]["template"]["spec"]
    container = dict(pod["containers"][0], name="kserve-container")
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": _metadata(spec),
        "spec": {
            "predictor": {
                "minReplicas": spec.replicas,
                "maxReplicas": spec.replicas,
                "containers": [container],
                "volumes": pod["volumes"],
                "tolerations": pod["tolerations"],
            }
        },
    }
