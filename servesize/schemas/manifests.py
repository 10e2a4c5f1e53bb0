"""Deployment artifacts of a plan (``GET /v1/plans/{id}/manifests``,
``POST /v1/sizing?manifests=true``)."""

from __future__ import annotations

from typing import Any

from servesize.schemas.base import ResponseModel

__all__ = ["ManifestsOut"]


class ManifestsOut(ResponseModel):
    """Deployment artifacts of one ranked plan; the objects are Kubernetes JSON (apply as YAML
    or JSON)."""

    plan_id: str | None
    """The saved plan; null for manifests returned with an unsaved answer."""
    rank: int
    kubernetes: list[dict[str, Any]]
    """Per pool: a ``v1`` ConfigMap of the files its command reads (TensorRT-LLM), a ``v1``
    Service and an ``apps/v1`` Deployment, or a ``leaderworkerset.x-k8s.io/v1``
    LeaderWorkerSet when a replica spans nodes; a router's Service and Deployment."""
    kserve: list[dict[str, Any]]
    """The same pools as KServe ``InferenceService`` objects."""
    llmd_values: dict[str, Any] | None = None
    """Values for llm-d's ModelService Helm chart (``llmd_chart``) where the plan fits it (a
    vLLM plan of single-node replicas); else null and the reason in ``notes``."""
    llmd_chart: str | None = None
    """``llm-d-modelservice`` and the chart version the values are written for."""
    benchmark_command: list[str]
    """``vllm bench serve`` at the plan's rate and lengths; its result file ingests with
    ``servesize-agent ingest --format vllm-bench``."""
    benchmark_script: str
    notes: list[str]
