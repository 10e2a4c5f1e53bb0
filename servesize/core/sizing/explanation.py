"""A plain-language account of a sizing result: what won, why the others lost, and — when
nothing qualifies — what stands in the way.

The text is built only from figures already in the result (costs, GPU counts, the binding
constraint, each rejection's reason and miss), so it never says more than the numbers do.
"""

from __future__ import annotations

from collections import Counter

from servesize.core.sizing.result import Plan, Rejection, SizingResult

__all__ = ["explain"]

_REASONS = {
    "over-gpu-limit": "would need more GPUs than allowed",
    "invalid-deployment": "are not valid deployments for their engine",
    "does-not-fit": "do not fit in GPU memory",
    "context-too-short": "have a max_model_len below the longest request",
    "unsupported": "are not supported",
    "infeasible-at-zero-load": "miss the SLO even with no load at all",
    "verification-failed": "failed their simulation at the target load",
}


def _money(value: float) -> str:
    return f"${value:,.2f}"


def _plan_line(plan: Plan) -> str:
    cost = plan.cost_per_hour
    price = f"{_money(cost)}/h" if cost is not None else "unpriced"
    if plan.verified:
        how = "verified by simulation"
        if plan.verification not in (None, "fleet"):
            how += f" ({plan.verification})"
    else:
        how = "screened analytically"
        if plan.notes:
            how += f" ({plan.notes[-1]})"
    return (
        f"{plan.candidate.label} × {plan.replicas} replicas ({plan.total_gpus} GPUs, {price}), "
        f"{how}; binding constraint {plan.binding}, {plan.utilization:.0%} of its capacity at "
        f"the target rate"
    )


def _versus(best: Plan, other: Plan) -> str:
    """Why ``other`` (the best plan of another hardware or kind) loses to ``best``."""
    name = f"{other.candidate.label} × {other.replicas}"
    best_cost, other_cost = best.cost_per_hour, other.cost_per_hour
    if best_cost is not None and other_cost is not None and other_cost > best_cost:
        more = other_cost / best_cost - 1
        return f"{name} costs {_money(other_cost - best_cost)}/h more ({more:.0%})"
    if best_cost is not None and other_cost is None:
        return f"{name} has no price"
    if other.total_gpus > best.total_gpus:
        return f"{name} needs {other.total_gpus - best.total_gpus} more GPUs"
    return f"{name} ties on cost and GPUs but has less spare capacity"


def _alternatives(plans: tuple[Plan, ...]) -> list[str]:
    """The best plan of each other (hardware, kind), in ranking order, against the winner."""
    best = plans[0]
    seen = {(best.candidate.hardware_id, best.candidate.kind)}
    lines = []
    for plan in plans[1:]:
        key = (plan.candidate.hardware_id, plan.candidate.kind)
        if key not in seen:
            seen.add(key)
            lines.append(_versus(best, plan))
    return lines


def _rejections(rejected: tuple[Rejection, ...] | list[Rejection]) -> str:
    counts = Counter(r.reason for r in rejected)
    parts = [f"{n} {_REASONS.get(reason, reason)}" for reason, n in counts.most_common() if n > 0]
    return "; ".join(parts)


def _closest_miss(rejected: tuple[Rejection, ...] | list[Rejection]) -> Rejection | None:
    misses = [r for r in rejected if r.miss is not None]
    return min(misses, key=lambda r: r.miss or 0.0) if misses else None


def explain(result: SizingResult) -> str:
    """One paragraph: the winner and its margin over the runner-up, the rejections by reason,
    or, without any plan, what every candidate ran into and the nearest miss."""
    rejected = result.rejected
    if result.plans:
        best = result.plans[0]
        text = f"Best: {_plan_line(best)}."
        alternatives = _alternatives(result.plans)
        if alternatives:
            text += " The best alternatives: " + "; ".join(alternatives) + "."
        if rejected:
            text += f" Of the other candidates, {_rejections(rejected)}."
        return text
    if not rejected:
        return "No candidate configuration was enumerated: widen the candidate sets."
    text = f"No deployment meets the SLO at {result.target_rate_per_s:g} requests/s: "
    text += f"{_rejections(rejected)}."
    closest = _closest_miss(rejected)
    if closest is not None:
        text += f" Nearest miss: {closest.candidate.label} ({closest.detail})."
    if all(r.reason == "infeasible-at-zero-load" for r in rejected):
        text += (
            " The SLO is below what any candidate achieves on an idle engine, so no number of "
            "replicas can meet it: relax the target or add faster hardware."
        )
    elif all(r.reason == "over-gpu-limit" for r in rejected):
        text += " Raise max_gpus or lower the target rate."
    return text
