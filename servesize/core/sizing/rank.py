"""Ranking plans: by ``cost_per_hour = replicas × GPUs per replica × price`` (unpriced plans
last), ties to fewer GPUs, then to more spare capacity (lower utilization), then to fewer
serving features (a draft or a host tier that buys nothing is not chosen). Plans sized with
``rank_by="energy"`` rank by energy per million output tokens first (plans without an energy
figure last), then as above."""

from __future__ import annotations

from collections.abc import Iterable

from servesize.core.sizing.result import Plan

__all__ = ["rank_key", "ranked", "unpriced_warning"]


def rank_key(plan: Plan) -> tuple[bool, float, bool, float, int, float, int]:
    """Sort key: (by energy: no energy figure last, then kWh per million output tokens), then
    unpriced last, cost per hour, total GPUs, utilization, features used."""
    cost = plan.cost_per_hour
    energy = plan.energy.energy_per_million_output_tokens_kwh if plan.energy else None
    by_energy = plan.rank_by == "energy"
    return (
        by_energy and energy is None,
        energy if by_energy and energy is not None else 0.0,
        cost is None,
        cost if cost is not None else 0.0,
        plan.total_gpus,
        plan.utilization,
        len(plan.candidate.features),
    )


def ranked(plans: Iterable[Plan]) -> tuple[Plan, ...]:
    """``plans`` in rank order (stable: equal keys keep their order)."""
    return tuple(sorted(plans, key=rank_key))


def unpriced_warning(plans: Iterable[Plan]) -> str | None:
    """The warning that plans without a price are ranked last, naming their hardware; ``None``
    when every plan is priced."""
    unpriced = sorted({p.candidate.hardware_id for p in plans if p.price_per_gpu_hour is None})
    if not unpriced:
        return None
    return (
        f"no price for {', '.join(unpriced)}: those plans are ranked after the priced ones "
        "(give prices per GPU-hour)"
    )
