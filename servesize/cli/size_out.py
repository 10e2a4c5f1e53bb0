"""``servesize size --out DIR``: per ranked plan, its JSON, launch commands, Kubernetes and
KServe manifests (YAML) and a benchmark script.

Files, for plan rank ``N``: ``plan-N.json``, ``plan-N.command.sh``, ``plan-N.k8s.yaml``
(per pool a ConfigMap of the files its command reads, a Service and a Deployment, or a
LeaderWorkerSet when a replica spans nodes; a router's Service and Deployment),
``plan-N.kserve.yaml`` (single-pod pools only), ``plan-N.llmd-values.yaml`` (llm-d's
ModelService chart, vLLM plans of single-node replicas) and ``plan-N.bench.sh``. A plan that
cannot be deployed (one ``mpirun`` job across nodes) gets no manifests; its JSON says why.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servesize.core.sizing import Plan, SizingTraffic
    from servesize.prices import PriceQuote

__all__ = ["dump_yaml", "write_plans"]


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string is a YAML double-quoted scalar (JSON's escapes are a subset of YAML's).
    return json.dumps(str(value))


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")


def _key(key: Any) -> str:
    """A mapping key: plain when it is a simple name (``nvidia.com/gpu``), else quoted."""
    text = str(key)
    plain = _PLAIN_KEY.match(text) and text.lower() not in {"null", "true", "false", "yes", "no"}
    return text if plain else json.dumps(text)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict) and value:
        out = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                out += [f"{pad}{_key(key)}:", *_lines(item, indent + 2)]
            else:
                out.append(f"{pad}{_key(key)}: {_block(item)}")
        return out
    if isinstance(value, list) and value:
        out = []
        for item in value:
            if isinstance(item, dict | list) and item:
                inner = _lines(item, indent + 2)
                out += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
            else:
                out.append(f"{pad}- {_block(item)}")
        return out
    return [f"{pad}{_block(value)}"]


def _block(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump_yaml(documents: Sequence[Any]) -> str:
    """YAML documents (``---`` separated), block style, every string value double-quoted."""
    return "".join("---\n" + "\n".join(_lines(doc, 0)) + "\n" for doc in documents)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _plan_json(rank: int, plan: Plan, launches: list[tuple[str, list[str]]]) -> dict[str, Any]:
    res = plan.memory.deployment
    predicted = plan.simulation or plan.tier_a
    return {
        "rank": rank,
        "label": plan.candidate.label,
        "kind": plan.candidate.kind,
        "hardware": plan.candidate.hardware_id,
        "engine": plan.candidate.engine,
        "engine_version": res.engine_version,
        "gpus_per_replica": plan.gpus_per_replica,
        "replicas": plan.replicas,
        "prefill_replicas": plan.prefill_replicas,
        "decode_replicas": plan.decode_replicas,
        "total_gpus": plan.total_gpus,
        "commands": dict(launches),
        "max_rate_per_replica_per_s": plan.max_rate_per_replica_per_s,
        "utilization": plan.utilization,
        "binding": plan.binding,
        "price_per_gpu_hour": plan.price_per_gpu_hour,
        "cost_per_hour": plan.cost_per_hour,
        "predicted": None
        if predicted is None
        else {
            "source": predicted.source,
            "ttft_p95_s": _finite(predicted.ttft_p95_s),
            "tpot_p95_s": _finite(predicted.tpot_p95_s),
            "e2e_p95_s": _finite(predicted.e2e_p95_s),
            "throughput_requests_per_s": _finite(predicted.throughput_requests_per_s),
        },
        "verified": plan.verified,
    }


def write_plans(
    out: Path,
    *,
    model: str,
    plans: Sequence[Plan],
    launches: Sequence[list[tuple[str, list[str]]]],
    traffic: SizingTraffic,
    gpus_per_node: dict[str, int],
    gpu_names: dict[str, str],
    quotes: dict[str, PriceQuote],
) -> list[Path]:
    """Write every plan's files under ``out`` (created); returns the paths written."""
    from servesize.core.deploy import (
        LLMD_CHART,
        LLMD_CHART_VERSION,
        BenchmarkJob,
        PlanCommand,
        PlanDeployment,
        benchmark_script,
        llmd_values,
        plan_objects,
    )

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def write(name: str, text: str, *, executable: bool = False) -> None:
        path = out / name
        path.write_text(text)
        if executable:
            path.chmod(0o755)
        written.append(path)

    for rank, (plan, roles) in enumerate(zip(plans, launches, strict=True), 1):
        info = _plan_json(rank, plan, roles)
        quote = quotes.get(plan.candidate.hardware_id)
        info["price_source"] = (
            None
            if quote is None
            else {
                "origin": quote.origin,
                "provider": quote.provider,
                "source_url": quote.source_url,
                "as_of": quote.as_of.isoformat() if quote.as_of else None,
            }
        )
        commands = "".join(f"# {role}\n{shlex.join(argv)}\n" for role, argv in roles)
        write(f"plan-{rank}.command.sh", "#!/bin/sh\n" + commands, executable=True)
        for command in plan.launch.commands if plan.launch is not None else ():
            for name, content in command.files:
                write(f"plan-{rank}.{Path(name).name}", content)
        planned = [
            PlanCommand(role=c.role, argv=c.argv, files=c.files)
            for c in (plan.launch.commands if plan.launch is not None else ())
        ]
        try:
            objects = plan_objects(
                PlanDeployment(
                    name=f"{model.split('/')[-1]}-{plan.candidate.hardware_id}-{rank}",
                    engine=plan.candidate.engine,  # type: ignore[arg-type]
                    engine_version=plan.memory.deployment.engine_version,
                    commands=planned,
                    gpus_per_replica=plan.gpus_per_replica,
                    replicas=plan.replicas,
                    prefill_replicas=plan.prefill_replicas,
                    decode_replicas=plan.decode_replicas,
                    gpus_per_node=gpus_per_node.get(plan.candidate.hardware_id, 8),
                )
            )
        except ValueError as exc:
            info["manifests"] = f"not written: {exc}"
        else:
            kubernetes, kserve = objects.kubernetes, objects.kserve
            info["manifest_notes"] = objects.notes
            res = plan.memory.deployment
            try:
                values = llmd_values(
                    model=model,
                    engine=plan.candidate.engine,
                    engine_version=res.engine_version,
                    commands=[(c.role, c.argv) for c in planned],
                    tensor_parallel=res.tensor_parallel_size,
                    data_parallel=res.data_parallel_size,
                    gpus_per_replica=plan.gpus_per_replica,
                    replicas=plan.replicas,
                    prefill_replicas=plan.prefill_replicas,
                    decode_replicas=plan.decode_replicas,
                )
            except ValueError as exc:
                info["llmd_values"] = f"not written: {exc}"
            else:
                info["llmd_values"] = f"{LLMD_CHART} {LLMD_CHART_VERSION}"
                write(f"plan-{rank}.llmd-values.yaml", dump_yaml([values]))
            write(f"plan-{rank}.k8s.yaml", dump_yaml(kubernetes))
            if kserve:
                write(f"plan-{rank}.kserve.yaml", dump_yaml(kserve))
            job = BenchmarkJob(
                model=model,
                base_url=f"http://{objects.entry_service}:{objects.entry_port}",
                rate_per_s=traffic.rate_per_s,
                input_tokens=max(1, round(traffic.input_tokens.mean_tokens)),
                output_tokens=max(1, round(traffic.output_tokens.mean_tokens)),
                result_file=f"plan-{rank}.bench.json",
                gpu_name=gpu_names.get(plan.candidate.hardware_id, plan.candidate.hardware_id),
                gpus=plan.total_gpus,
            )
            write(
                f"plan-{rank}.bench.sh",
                benchmark_script(job, plan_ref=f"plan {rank} ({plan.candidate.label})"),
                executable=True,
            )
        write(f"plan-{rank}.json", json.dumps(info, indent=2, allow_nan=False) + "\n")
    return written
