"""A plain-language account of a sizing result: what won, why the others lost, and — when
nothing qualifies — what stands in the way.

The text is built only from figures already in the result (costs, GPU counts, the binding
constraint, each rejection's reason and miss), so it never says more than the numbers do.
"""

from __future__ import annotations

from collections import Counter

from servesize.core.sizing.result import Plan, Rejection, SizingResult
from servesize.core.sizing.space import Candidate

__all__ = ["explain", "feature_lines"]

_REASONS = {
    "over-gpu-limit": "would need more GPUs than allowed",
    "invalid-deployment": "are not valid deployments for their engine",
    "does-not-fit": "do not fit in GPU memory",
    "context-too-short": "have a max_model_len below the longest request",
    "unsupported": "are not supported",
    "infeasible-at-zero-load": "miss the SLO even with no load at all",
    "verification-failed": "failed their simulation at the target load",
}


_FEATURE_NOTES = ("prefix cache:", "speculative decoding:")
"""How the Tier A notes of :func:`~.features.feature_notes` begin."""


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
        said = [n for n in plan.notes if not n.startswith(_FEATURE_NOTES)]
        if said:
            how += f" ({said[-1]})"
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


_FEATURES = (("spec=", "speculative decoding"), ("offload=", "KV offload"))


def _uses(c: Candidate, prefix: str) -> bool:
    return any(word.startswith(prefix) for word in c.features)


def _note(plan: Plan, name: str) -> str:
    """The plan's own account of the feature (its Tier A note), if any."""
    key = "speculative decoding:" if name == "speculative decoding" else "prefix cache:"
    return next((n for n in plan.notes if n.startswith(key)), "")


def _feature_line(result: SizingResult, prefix: str, name: str) -> str | None:
    """Why the feature was or was not chosen: the best plan with it against the best without,
    or what every candidate with (or without) it ran into."""
    offered = [p.candidate for p in result.plans] + [r.candidate for r in result.rejected]
    if not any(_uses(c, prefix) for c in offered):
        return None
    best = result.plans[0] if result.plans else None
    chosen = best is not None and _uses(best.candidate, prefix)
    rival = next((p for p in result.plans if _uses(p.candidate, prefix) != chosen), None)
    verb = "chosen" if chosen else "not chosen"
    head = f"{name} {verb}"
    if best is None:
        return None
    if rival is None:
        side = "without" if chosen else "with"
        losers = [r for r in result.rejected if _uses(r.candidate, prefix) != chosen]
        why = f"; {losers[0].candidate.brief()}: {losers[0].detail}" if losers else ""
        text = f"{head}: no candidate {side} it is a plan ({_rejections(losers)}{why})"
    else:
        winner, loser = (best, rival)
        text = f"{head}: {_versus(winner, loser)}"
    own = _note(best if chosen else (rival or best), name)
    return f"{text}{'; ' + own if own else ''}"


def feature_lines(result: SizingResult) -> list[str]:
    """For each serving feature the search offered, why the best plan does or does not use
    it."""
    lines = (_feature_line(result, prefix, name) for prefix, name in _FEATURES)
    return [line for line in lines if line]


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
        for line in feature_lines(result):
            text += f" {line[0].upper()}{line[1:]}."
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
