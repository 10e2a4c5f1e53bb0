"""The launch commands of one deployment (``POST /v1/memory``'s ``launch``): the same
:func:`~servesize.core.sizing.launch_plan` a sizing plan carries, with the deployment's own
prefix caching, host KV tier and speculative decoding."""

from __future__ import annotations

from servesize.api.render.sizing import launch_out
from servesize.core.architecture import Architecture, summarize
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import MemoryPlan
from servesize.core.sizing import (
    launch_plan,
    unsupported_kv,
    unsupported_layout,
    unsupported_speculative,
)
from servesize.schemas.launch import LaunchOut
from servesize.schemas.speculative import SpeculativeIn, speculative_decoding

__all__ = ["deployment_launch"]


def deployment_launch(
    model_id: str,
    architecture: Architecture,
    hardware: HardwareSpec,
    plan: MemoryPlan,
    speculative: SpeculativeIn | None,
) -> tuple[LaunchOut | None, str | None]:
    """``(launch, None)``, or ``(None, why)`` when the plan does not fit or the engine release
    cannot launch it."""
    if not plan.fits:
        return None, "the deployment does not fit: " + ("; ".join(plan.reasons) or "see reasons")
    res = plan.deployment
    is_moe = summarize(architecture).num_experts > 0
    link = hardware.interconnect
    per_node = link.gpus_per_node if link is not None else None
    spec = speculative_decoding(speculative)
    refused = (
        unsupported_kv(res)
        or unsupported_layout(res, is_moe=is_moe, gpus_per_node=per_node)
        or unsupported_speculative(res.engine, spec)
    )
    if refused is not None:
        return None, refused
    launch = launch_plan(model_id, plan, is_moe=is_moe, gpus_per_node=per_node, speculative=spec)
    return launch_out(launch), None
