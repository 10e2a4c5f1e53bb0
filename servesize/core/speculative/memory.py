"""The draft's memory in the deployment a replica plans."""

from __future__ import annotations

from dataclasses import replace

from servesize.core.architecture import Architecture
from servesize.core.memory import Deployment, InvalidDeploymentError
from servesize.core.speculative.cost import DraftPlan, draft_plan
from servesize.core.speculative.decoding import SpeculativeDecoding, speculative_issues

__all__ = ["with_draft"]


def with_draft(
    deployment: Deployment, architecture: Architecture, spec: SpeculativeDecoding
) -> tuple[Deployment, DraftPlan]:
    """``deployment`` with the draft's weights and KV layers (see the module docstring), and
    the sized draft; refuses what the engines refuse
    (:func:`~servesize.core.speculative.speculative_issues`) as
    :class:`~servesize.core.memory.InvalidDeploymentError` naming the field."""
    issues = speculative_issues(spec, architecture)
    if issues:
        raise InvalidDeploymentError(issues)
    plan = draft_plan(spec, architecture, deployment.tensor_parallel_size)
    sized = replace(
        deployment,
        draft_weight_bytes_per_gpu=plan.weight_bytes_per_gpu,
        draft_kv_layers=plan.kv_layers,
    )
    return sized, plan
