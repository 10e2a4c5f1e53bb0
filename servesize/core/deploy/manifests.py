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
    "config_map",
    "container",
    "deployment_objects",
    "kserve_inference_service",
    "pod_spec",
    "resource_name",
    "service",
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
CONFIG_DIR = "/etc/servesize"
"""Where a pool's ConfigMap (the files its command reads) is mounted; the command's file
arguments are rewritten to ``CONFIG_DIR/<basename>``."""
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
    files: Sequence[tuple[str, str]] = ()
    """``(path, content)`` the command reads (TensorRT-LLM's ``--extra_llm_api_options``
    YAML): one ConfigMap key per file, mounted at :data:`CONFIG_DIR`."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_PORTS:
            raise ValueError(f"engine: {self.engine!r} is not one of {', '.join(ENGINE_PORTS)}")
        if len(self.command) < 1 or not all(isinstance(a, str) and a for a in self.command):
            raise ValueError("command: must be a non-empty list of non-empty strings")
        least = 0 if self.role == "router" else 1
        if self.gpus_per_replica < least or self.replicas < 1:
            raise ValueError(f"gpus_per_replica must be >= {least} and replicas >= 1")
        keys = [config_key(path) for path, _ in self.files]
        if len(set(keys)) != len(keys):
            raise ValueError(f"files: two files share a name ({', '.join(keys)})")
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


def config_key(path: str) -> str:
    """The ConfigMap key of a file: its base name (keys allow ``[-._a-zA-Z0-9]``)."""
    key = path.rsplit("/", 1)[-1]
    if not key or re.fullmatch(r"[-._a-zA-Z0-9]+", key) is None or key in (".", ".."):
        raise ValueError(f"files: {path!r} has no name usable as a ConfigMap key")
    return key


def _argv(spec: DeploySpec, command: Sequence[str] | None = None) -> list[str]:
    """The planned command with ``--host 0.0.0.0`` and ``--port`` added when absent, and each
    file it reads pointed at the mounted ConfigMap."""
    moved = {path: f"{CONFIG_DIR}/{config_key(path)}" for path, _ in spec.files}
    argv = [moved.get(a, a) for a in (spec.command if command is None else command)]
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


def container(
    spec: DeploySpec,
    *,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    probes: bool = True,
    gpus: int | None = None,
) -> dict[str, Any]:
    """The engine container of one pod: the planned command (or ``command`` + ``args`` given
    as they are), GPUs (``gpus``, default the replica's), probes, ``/dev/shm`` and the cache."""
    if command is None:
        argv = _argv(spec)
        command, args = argv[:1], argv[1:]
    port = spec.container_port
    count = str(spec.gpus_per_replica if gpus is None else gpus)
    env = {"HF_HOME": spec.model_cache.mount_path, **spec.env}
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model-cache", "mountPath": spec.model_cache.mount_path},
    ]
    if spec.files:
        mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
    out: dict[str, Any] = {
        "name": "engine",
        "image": spec.image or ENGINE_IMAGES[spec.engine].format(version=spec.engine_version),
        "command": list(command),
        "args": list(args or []),
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
        "resources": {"requests": {"nvidia.com/gpu": count}, "limits": {"nvidia.com/gpu": count}},
        "startupProbe": _probe(port, period_s=STARTUP_PERIOD_S, failures=STARTUP_FAILURES),
        "readinessProbe": _probe(port, period_s=5, failures=3),
        "livenessProbe": _probe(port, period_s=10, failures=3),
        "volumeMounts": mounts,
    }
    if count == "0":
        out["resources"] = {}
    if not probes:
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            del out[probe]
    return out


def pod_spec(
    spec: DeploySpec, containers: Sequence[dict[str, Any]], *, gpus: int | None = None
) -> dict[str, Any]:
    """A ``PodSpec`` around ``containers``: ``/dev/shm`` sized for ``gpus`` (default the
    replica's), the cache volume, the ConfigMap when the command reads files, GPU toleration."""
    shm = shm_bytes_for(spec.gpus_per_replica if gpus is None else gpus)
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm // GIB}Gi"}},
        _cache_volume(spec.model_cache),
    ]
    if spec.files:
        volumes.append({"name": "config", "configMap": {"name": config_map_name(spec)}})
    return {
        "containers": list(containers),
        "volumes": volumes,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }


def config_map_name(spec: DeploySpec) -> str:
    return f"{spec.object_name}-config"


def config_map(spec: DeploySpec) -> dict[str, Any]:
    """The ``v1`` ConfigMap holding every file the command reads, keyed by base name."""
    meta = _metadata(spec)
    meta["name"] = config_map_name(spec)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {config_key(path): content for path, content in spec.files},
    }


def _deployment(spec: DeploySpec) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": spec.object_name}
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
                "spec": pod_spec(spec, [container(spec)]),
            },
        },
    }


def service(spec: DeploySpec, selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``ClusterIP`` Service of the pool (``selector`` adds to the pool's name label)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec),
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": spec.object_name, **(selector or {})},
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
    """The pool's ``Deployment`` and ``Service``, in apply order (Service first), preceded by
    the ConfigMap of the files its command reads, if any."""
    head = [config_map(spec)] if spec.files else []
    return [*head, service(spec), _deployment(spec)]


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
