"""Every Kubernetes object of one plan, from its launch commands (``Plan.launch``).

The commands decide the form (roles as :class:`servesize.core.sizing.LaunchCommand` names them):

=====================================  ==========================================================
``server`` / ``prefill`` / ``decode``  one ``apps/v1`` Deployment + ``v1`` Service per pool
``server<k>`` (TensorRT-LLM dense DP)  one pod per copy: Deployment of ``replicas × copies``
``node<k>`` / ``<pool>-node<k>``       a LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) per
                                       pool, one group per replica, leader = node 0
``router``                             a Deployment + Service of its own (no GPU)
=====================================  ==========================================================

A pool's files (TensorRT-LLM's ``--extra_llm_api_options`` YAML) become a ConfigMap mounted at
:data:`.manifests.CONFIG_DIR`. Placeholders are substituted: ``$MASTER_ADDR`` (and
``$PREFILL_MASTER_ADDR`` / ``$DECODE_MASTER_ADDR``) by ``$LWS_LEADER_ADDRESS``, which the LWS
controller sets in every pod of a group (``pkg/utils/pod``: ``LWS_LEADER_ADDRESS``,
``LWS_WORKER_INDEX``, LWS v0.7); ``$NODE<k>_ADDR`` by the DNS name of worker ``k`` of each group
(pod ``<lws>-<group>[-<k>]`` under the headless Service ``<lws>`` LWS creates);
``$PREFILL_ADDR`` / ``$DECODE_ADDR`` by the pools' Services.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from servesize.core.deploy.manifests import (
    DeploySpec,
    Engine,
    ModelCache,
    _argv,
    _labels,
    _metadata,
    config_map,
    container,
    deployment_objects,
    kserve_inference_service,
    pod_spec,
    service,
)

__all__ = ["LWS_API_VERSION", "PlanCommand", "PlanDeployment", "PlanObjects", "plan_objects"]

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Label LWS puts on every pod: ``0`` on the leader (``pkg/utils/constants``)."""
ROUTER_PORT = 8000
"""``sglang_router`` and ``trtllm-serve disaggregated`` listen where the commands say: 8000."""
_MASTER = re.compile(r"\$(?:PREFILL_|DECODE_)?MASTER_ADDR\b")
_NODE = re.compile(r"\$NODE(\d+)_ADDR\b")
_ROLE = re.compile(r"^(?:(prefill|decode)-)?node(\d+)$")
_COPY = re.compile(r"^(server|prefill|decode)(\d+)(?:-node\d+)?$")
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./$-]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCommand:
    """One launch command: its role, argument list and the files it reads."""

    role: str
    argv: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanDeployment:
    """A plan as the manifests need it."""

    name: str
    engine: Engine
    engine_version: str
    commands: Sequence[PlanCommand]
    gpus_per_replica: int
    replicas: int
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    gpus_per_node: int = 8
    namespace: str | None = None
    model_cache: ModelCache = field(default_factory=ModelCache)


@dataclass(frozen=True, slots=True)
class PlanObjects:
    kubernetes: list[dict[str, Any]]
    """Per pool in apply order: its ConfigMap (if any), Service, then the workload."""
    kserve: list[dict[str, Any]]
    """InferenceServices, for pools of single-pod replicas only."""
    entry_service: str
    """The Service clients (and the benchmark) talk to: the router's, else the first pool's."""
    entry_port: int
    notes: list[str]


def _sh(argv: Sequence[str]) -> str:
    """``argv`` for ``sh -c``: a token holding ``$VAR`` is double-quoted so the shell expands
    it; every other token is quoted by :func:`shlex.quote`."""
    out = []
    for a in argv:
        if "$" in a and _SAFE.match(a):
            out.append(f'"{a}"')
        else:
            out.append(shlex.quote(a))
    return " ".join(out)


def _pool(role: str) -> str:
    node = _ROLE.match(role)
    if node:
        return node.group(1) or "both"
    copy = _COPY.match(role)
    if copy:
        return "both" if copy.group(1) == "server" else copy.group(1)
    return {"server": "both"}.get(role, role)


def _strip_copy(argv: Sequence[str], port: int) -> list[str]:
    """A dense TensorRT-LLM copy's command for a pod of its own: no ``env
    CUDA_VISIBLE_DEVICES=`` prefix (the pod sees only its GPUs), the engine's port."""
    out = list(argv)
    if out[:1] == ["env"]:
        out = out[2:]
    if "--port" in out:
        out[out.index("--port") + 1] = str(port)
    return out


def _lws(
    spec: DeploySpec, nodes: Sequence[PlanCommand], gpus_per_pod: int, *, independent: bool
) -> dict[str, Any]:
    """One LeaderWorkerSet: ``replicas`` groups of ``len(nodes)`` pods; the leader runs node 0,
    worker ``k`` (``$LWS_WORKER_INDEX``) runs node ``k``. Node 0 alone serves HTTP unless the
    nodes are independent servers (SGLang dense DP across nodes, behind its router)."""

    def script(argv: Sequence[str]) -> str:
        return _sh([_MASTER.sub("$LWS_LEADER_ADDRESS", a) for a in _argv(spec, argv)])

    leader = container(
        spec, command=["/bin/sh", "-c"], args=[f"exec {script(nodes[0].argv)}"], gpus=gpus_per_pod
    )
    cases = " ".join(f"{k}) exec {script(n.argv)} ;;" for k, n in enumerate(nodes) if k)
    worker = container(
        spec,
        command=["/bin/sh", "-c"],
        args=[f'case "$LWS_WORKER_INDEX" in {cases} esac; exit 1'],
        probes=independent,
        gpus=gpus_per_pod,
    )
    template = {"metadata": {"labels": _labels(spec)}}
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(spec),
        "spec": {
            "replicas": spec.replicas,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": len(nodes),
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    **template,
                    "spec": pod_spec(spec, [leader], gpus=gpus_per_pod),
                },
                "workerTemplate": {
                    **template,
                    "spec": pod_spec(spec, [worker], gpus=gpus_per_pod),
                },
            },
        },
    }


def _pod_dns(lws: str, group: int, worker: int) -> str:
    return f"{lws}-{group}" if worker == 0 else f"{lws}-{group}-{worker}"


def plan_objects(plan: PlanDeployment) -> PlanObjects:
    """The plan's objects; ``ValueError`` names what cannot be deployed and why."""
    if not plan.commands:
        raise ValueError(f"no {plan.engine} launch command for this plan")
    pools: dict[str, list[PlanCommand]] = {}
    for c in plan.commands:
        pools.setdefault(_pool(c.role), []).append(c)
    unknown = set(pools) - {"both", "prefill", "decode", "router"}
    if unknown:
        raise ValueError(f"unknown command roles {sorted(unknown)}")
    if any(a == "mpirun" for c in plan.commands for a in c.argv[:1]):
        raise ValueError(
            "the replica is one mpirun job across nodes (TensorRT-LLM); that needs an MPI "
            "launcher with SSH between pods (e.g. the MPI Operator), not generated"
        )
    replicas = {
        "both": plan.replicas,
        "prefill": plan.prefill_replicas or plan.replicas,
        "decode": plan.decode_replicas or plan.replicas,
    }
    base = DeploySpec(
        name=plan.name,
        engine=plan.engine,
        command=plan.commands[0].argv,
        gpus_per_replica=max(plan.gpus_per_replica, 1),
        replicas=1,
        engine_version=plan.engine_version,
        gpus_per_node=max(plan.gpus_per_replica, plan.gpus_per_node),
        namespace=plan.namespace,
        model_cache=plan.model_cache,
    )
    objects: list[dict[str, Any]] = []
    kserve: list[dict[str, Any]] = []
    notes: list[str] = []
    addresses: dict[str, str] = {}
    node_urls: dict[int, list[str]] = {}
    for pool in ("both", "prefill", "decode"):
        commands = pools.get(pool)
        if not commands:
            continue
        files = tuple(dict(f for c in commands for f in c.files).items())
        spec = replace(base, role=pool, replicas=replicas[pool], command=commands[0].argv)
        spec = replace(spec, files=files)
        if _ROLE.match(commands[0].role):
            nodes = sorted(commands, key=lambda c: int(_ROLE.match(c.role).group(2)))  # type: ignore[union-attr]
            per_pod = -(-plan.gpus_per_replica // len(nodes))
            if per_pod > plan.gpus_per_node:
                raise ValueError(
                    f"gpus_per_replica: {per_pod} GPUs per node exceed one node's "
                    f"{plan.gpus_per_node}"
                )
            spec = replace(spec, gpus_per_replica=per_pod, gpus_per_node=plan.gpus_per_node)
            independent = not any(_MASTER.search(a) for c in nodes for a in c.argv)
            if spec.files:
                objects.append(config_map(spec))
            objects.append(service(spec, {LWS_INDEX_LABEL: "0"}))
            objects.append(_lws(spec, nodes, per_pod, independent=independent))
            lws = spec.object_name
            for k in range(len(nodes)):
                node_urls[k] = [_pod_dns(lws, g, k) + f".{lws}" for g in range(spec.replicas)]
            notes.append(
                f"{pool if pool != 'both' else 'the'} pool: a LeaderWorkerSet of "
                f"{spec.replicas} groups × {len(nodes)} pods ({per_pod} GPUs each); install the "
                "LWS controller (kubernetes-sigs/lws) first"
            )
        else:
            copies = len(commands)
            argv = tuple(commands[0].argv)
            if copies > 1 or _COPY.match(commands[0].role):
                argv = tuple(_strip_copy(argv, spec.container_port))
            per_pod = plan.gpus_per_replica // copies
            if per_pod > plan.gpus_per_node:
                raise ValueError(
                    f"gpus_per_replica: {per_pod} GPUs exceed one node's {plan.gpus_per_node}; "
                    "the plan's commands give no per-node form"
                )
            spec = replace(
                spec,
                command=argv,
                gpus_per_replica=per_pod,
                replicas=spec.replicas * copies,
                gpus_per_node=plan.gpus_per_node,
            )
            objects += deployment_objects(spec)
            kserve.append(kserve_inference_service(spec))
            if copies > 1:
                notes.append(
                    f"{copies} servers per replica on disjoint GPUs become {copies} pods of "
                    f"{per_pod} GPUs each behind the Service"
                )
        addresses[pool] = spec.object_name
    first = next(o for o in objects if o["kind"] == "Service")
    entry = (first["metadata"]["name"], first["spec"]["ports"][0]["port"])
    for router in pools.get("router", []):
        subs = {"$PREFILL_ADDR": addresses.get("prefill"), "$DECODE_ADDR": addresses.get("decode")}

        def sub(text: str, subs: Mapping[str, str | None] = subs) -> str:
            for key, value in subs.items():
                if value is not None:
                    text = text.replace(key, value)
            return text

        routed: list[str] = []
        for a in router.argv:
            found = _NODE.search(a)
            if found and int(found.group(1)) in node_urls:
                routed += [_NODE.sub(host, a) for host in node_urls[int(found.group(1))]]
            else:
                routed.append(sub(a))
        files = tuple((path, sub(text)) for path, text in router.files)
        spec = replace(
            base,
            role="router",
            command=tuple(routed),
            files=files,
            gpus_per_replica=0,
            replicas=1,
            port=ROUTER_PORT,
        )
        objects += deployment_objects(spec)
        entry = (spec.object_name, ROUTER_PORT)
        notes.append(
            "router: one Deployment + Service in front of the pools; BASE_URL points at it"
        )
    if "prefill" in pools and "router" not in pools:
        notes.append(
            "disaggregated: route requests through a prefill/decode proxy (e.g. llm-d's or "
            "vLLM's disaggregation proxy) in front of both Services, and point BASE_URL at it"
        )
    return PlanObjects(
        kubernetes=objects,
        kserve=kserve,
        entry_service=entry[0],
        entry_port=entry[1],
        notes=notes,
    )
