"""Service-level objectives: specification, evaluation against a run or an analytic estimate,
and the capacity (maximum rate or concurrency) that meets them (issue 8, modeling.md §4).

=============================  ===============================================================
``ServiceLevelObjective``      latency targets, failure budget, throughput floor, attainment
``LatencyTarget``              ``statistic(metric) <= limit_s``
``AttainmentTarget``           at least ``goal`` of requests meet the limits jointly
``evaluate_summary``           checks, margins and the binding constraint of a simulated run
``evaluate_analytic``          the same from a Tier A estimate (a screen)
``zero_load_violations``       targets below what an idle engine achieves
``search_capacity``            the largest rate or concurrency meeting the SLO, and the curve
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
    "METRICS",
    "STATISTICS",
    "AttainmentTarget",
    "CapacityResult",
    "Check",
    "CurvePoint",
    "Infeasibility",
    "LatencyTarget",
    "Metric",
    "ServiceLevelObjective",
    "SloEvaluation",
    "Statistic",
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
    "search_capacity",
    "zero_load_latencies",
    "zero_load_violations",
]
