"""Values for llm-d's ModelService Helm chart (``llm-d-incubation/llm-d-modelservice``, chart
``llm-d-modelservice`` v0.4.12, app v0.4.0, commit 3051935e) from a vLLM plan.

The chart's ``vllmServe`` model command (``templates/_helpers.tpl``:
``llm-d-modelservice.vllmServeModelCommand``) runs::

    vllm serve <model> --port <P> [--tensor-parallel-size T] [--data-parallel-size D]
        [--data-parallel-size-local L] --served-model-name <name> <container.args...>

with ``T = parallelism.tensor``, ``D = parallelism.data``, ``L = parallelism.dataLocal`` (each
only when > 1), ``P = routing.servicePort`` for prefill pods and ``routing.proxy.targetPort``
for decode pods behind the routing sidecar. So ``args`` is the plan's command without
``vllm serve MODEL`` and without the flags the chart writes itself (``--host``, ``--port``,
``--tensor-parallel-size``, ``--data-parallel-size``, ``--data-parallel-size-local``); every
other knob (KV pool, batch limits, KV dtype, pipeline parallelism, the NIXL connector) passes
through. GPU requests are set explicitly (the chart's own ``tensor × dataLocal`` misses
pipeline parallelism). The weights live on the ``model-cache`` PersistentVolumeClaim as in
:mod:`.manifests`: ``modelArtifacts.uri = pvc+hf://model-cache/hub/<org>/<model>`` makes the
chart mount it at ``/model-cache`` and set ``HF_HUB_CACHE=/model-cache/hub``, writable
(``readOnly: false``) so the first pod downloads into it.

Only single-node vLLM replicas fit: the chart's multi-node form (``multinode: true``) writes its
own data-parallel addressing, and it has no SGLang or TensorRT-LLM command.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesize.core.deploy.manifests import ENGINE_IMAGES, resource_name, shm_bytes_for

__all__ = ["LLMD_CHART", "LLMD_CHART_VERSION", "llmd_values"]

LLMD_CHART = "llm-d-modelservice"
LLMD_CHART_VERSION = "v0.4.12"
SERVICE_PORT = 8000
PROXY_TARGET_PORT = 8200
"""``routing.proxy.targetPort``: where vLLM listens in a decode pod behind the sidecar."""
CHART_FLAGS = (
    "--host",
    "--port",
    "--tensor-parallel-size",
    "--data-parallel-size",
    "--data-parallel-size-local",
)
"""Flags (each with one value) the chart writes itself, or that a pod must not override."""


def _args(argv: Sequence[str], model: str) -> list[str]:
    if list(argv[:3]) != ["vllm", "serve", model]:
        raise ValueError(f"llm-d: the command does not start with 'vllm serve {model}'")
    out: list[str] = []
    rest = list(argv[3:])
    i = 0
    while i < len(rest):
        if rest[i] in CHART_FLAGS:
            i += 2
            continue
        out.append(rest[i])
        i += 1
    return out


def _pool(
    argv: Sequence[str] | None,
    *,
    model: str,
    replicas: int,
    tensor: int,
    data: int,
    gpus: int,
    image: str,
) -> dict[str, Any]:
    if argv is None:
        return {"create": False, "replicas": 0}
    shm = shm_bytes_for(gpus) // 2**30
    return {
        "create": True,
        "replicas": replicas,
        "parallelism": {"tensor": tensor, "data": data, "dataLocal": data, "workers": 1},
        "containers": [
            {
                "name": "vllm",
                "image": image,
                "modelCommand": "vllmServe",
                "args": _args(argv, model),
                "resources": {
                    "limits": {"nvidia.com/gpu": str(gpus)},
                    "requests": {"nvidia.com/gpu": str(gpus)},
                },
                "mountModelVolume": True,
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            }
        ],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm}Gi"}}],
    }


def llmd_values(
    *,
    model: str,
    engine: str,
    engine_version: str,
    commands: Sequence[tuple[str, Sequence[str]]],
    tensor_parallel: int,
    data_parallel: int,
    gpus_per_replica: int,
    replicas: int,
    prefill_replicas: int | None = None,
    decode_replicas: int | None = None,
) -> dict[str, Any]:
    """The chart's values for the plan; ``ValueError`` says why a plan does not fit.

    ``commands`` are ``(role, argv)``: ``server`` (aggregated: the decode pool serves every
    request, no sidecar) or ``prefill`` + ``decode`` (the sidecar routes over NIXL, connector
    ``nixlv2``)."""
    if engine != "vllm":
        raise ValueError(f"llm-d: the ModelService chart runs vLLM, not {engine}")
    roles = dict(commands)
    if set(roles) - {"server", "prefill", "decode"}:
        raise ValueError("llm-d: a replica spanning nodes or a router is not fitted")
    if "/" not in model:
        raise ValueError(f"llm-d: model {model!r} is not a Hugging Face <org>/<name> id")
    disaggregated = "prefill" in roles
    image = ENGINE_IMAGES["vllm"].format(version=engine_version)

    def pool(argv: Sequence[str] | None, count: int) -> dict[str, Any]:
        return _pool(
            argv,
            model=model,
            replicas=count,
            tensor=tensor_parallel,
            data=data_parallel,
            gpus=gpus_per_replica,
            image=image,
        )

    decode = roles.get("decode") if disaggregated else roles.get("server")
    if decode is None:
        raise ValueError("llm-d: no server or decode command")
    return {
        "multinode": False,
        "modelArtifacts": {
            "name": model,
            "uri": f"pvc+hf://model-cache/hub/{model}",
            "mountPath": "/model-cache",
            "readOnly": False,
            "labels": {
                "llm-d.ai/inference-serving": "true",
                "llm-d.ai/model": resource_name(model.split("/")[-1]),
            },
        },
        "accelerator": {"type": "nvidia"},
        "routing": {
            "servicePort": SERVICE_PORT,
            "proxy": {
                "enabled": disaggregated,
                "targetPort": PROXY_TARGET_PORT,
                "connector": "nixlv2",
            },
        },
        "decode": pool(decode, decode_replicas or replicas),
        "prefill": pool(roles.get("prefill"), prefill_replicas or 0),
    }
