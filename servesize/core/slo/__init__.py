"""Service-level objectives: specification, evaluation against a run or an analytic estimate,
and the capacity (maximum rate or concurrency) that meets them (docs/modeling.md §4, §3.11).

=============================  ===============================================================
``ServiceLevelObjective``      latency targets, failure budget, throughput floor, attainment
``LatencyTarget``              ``statistic(metric) <= limit_s``
``AttainmentTarget``           at least ``goal`` of requests meet the limits jointly
``evaluate_summary``           checks, margins and the binding constraint of a simulated run
``evaluate_analytic``          the same from a Tier A estimate (a screen)
``zero_load_violations``       targets below what an idle engine achieves
``search_capacity``            the bisection for the largest load meeting the SLO, and the curve
``plan_capacity``              Tier A's bracket, the bisection, seed confirmation, the floor
=============================  ===============================================================
"""

from servesize.core.slo.capacity import (
    CapacityResult,
    CurvePoint,
    certainly_missed,
    curve_point,
    knee_load,
    search_capacity,
)
from servesize.core.slo.capacity_plan import (
    CONFIRMATION_SEEDS,
    CapacityPlan,
    SeededProbe,
    ThroughputFloorUnreachableError,
    ThroughputOnlyObjectiveError,
    TierAEstimate,
    max_search_runs,
    plan_capacity,
    search_objective,
    tier_a_max_rate,
    tier_a_verdict,
)
from servesize.core.slo.evaluate import (
    Check,
    SloEvaluation,
    attainment_fraction,
    evaluate_analytic,
    evaluate_overload,
    evaluate_result,
    evaluate_summary,
    make_check,
)
from servesize.core.slo.feasibility import (
    Infeasibility,
    ZeroLoadLatencies,
    zero_load_latencies,
    zero_load_violations,
)
from servesize.core.slo.spec import (
    METRICS,
    STATISTICS,
    AttainmentTarget,
    LatencyTarget,
    Metric,
    ServiceLevelObjective,
    Statistic,
)

__all__ = [
    "CONFIRMATION_SEEDS",
    "METRICS",
    "STATISTICS",
    "AttainmentTarget",
    "CapacityPlan",
    "CapacityResult",
    "Check",
    "CurvePoint",
    "Infeasibility",
    "LatencyTarget",
    "Metric",
    "SeededProbe",
    "ServiceLevelObjective",
    "SloEvaluation",
    "Statistic",
    "ThroughputFloorUnreachableError",
    "ThroughputOnlyObjectiveError",
    "TierAEstimate",
    "ZeroLoadLatencies",
    "attainment_fraction",
    "certainly_missed",
    "curve_point",
    "evaluate_analytic",
    "evaluate_overload",
    "evaluate_result",
    "evaluate_summary",
    "knee_load",
    "make_check",
    "max_search_runs",
    "plan_capacity",
    "search_capacity",
    "search_objective",
    "tier_a_max_rate",
    "tier_a_verdict",
    "zero_load_latencies",
    "zero_load_violations",
]
