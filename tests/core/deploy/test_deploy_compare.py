"""Plan against measured: ratios, interval membership and the SLO on measured statistics,
checked against values worked by hand."""

from __future__ import annotations

import math

from servesize.core.deploy import check_slo, compare_metric
from servesize.core.slo import AttainmentTarget, LatencyTarget, ServiceLevelObjective

STATS = {
    "ttft_s": {"mean": 0.030, "p50": 0.029, "p90": 0.033, "p95": 0.034, "p99": 0.036},
    "tpot_s": {"mean": 0.006, "p50": 0.006, "p90": 0.0062, "p95": 0.0063, "p99": 0.0065},
    "itl_s": None,
    "e2e_s": None,
}


def test_ratio_and_interval() -> None:
    c = compare_metric("ttft_s.p50", 0.025, 0.029, (0.020, 0.030))
    assert math.isclose(c.ratio or 0, 1.16)  # 0.029 / 0.025
    assert c.within_interval is True
    assert compare_metric("x", 0.025, 0.031, (0.020, 0.030)).within_interval is False
    missing = compare_metric("itl_s.p50", None, 0.006)
    assert missing.ratio is None
    assert missing.within_interval is None
    assert compare_metric("x", math.inf, 1.0).predicted is None


def test_slo_checked_on_measured_statistics() -> None:
    slo = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p95", limit_s=0.035),
            LatencyTarget(metric="tpot", statistic="p99", limit_s=0.006),
        ),
        max_failure_rate=0.05,
        min_throughput_requests_per_s=0.5,
    )
    result = check_slo(slo, STATS, requests=10, failed=0, throughput_requests_per_s=0.8)
    verdicts = {c.name: (c.measured, c.held) for c in result.checks}
    assert verdicts["ttft_s.p95"] == (0.034, True)  # 34 ms <= 35 ms
    assert verdicts["tpot_s.p99"] == (0.0065, False)  # 6.5 ms > 6 ms
    assert verdicts["max_failure_rate"] == (0.0, True)
    assert verdicts["min_throughput_requests_per_s"] == (0.8, True)
    assert result.held is False


def test_failures_count_and_unknowable_targets_leave_the_verdict_open() -> None:
    slo = ServiceLevelObjective(
        targets=(LatencyTarget(metric="itl", statistic="p99", limit_s=0.1),),
        attainment=AttainmentTarget(goal=0.9, ttft_s=1.0),
    )
    # 1 failure in 4 requests = 25 % > the default budget of 0.
    failing = check_slo(slo, STATS, requests=4, failed=1, throughput_requests_per_s=1.5)
    assert failing.held is False
    # No failures: ITL was not measured and attainment needs per-request data.
    open_ = check_slo(slo, STATS, requests=4, failed=0, throughput_requests_per_s=1.5)
    assert open_.held is None
