"""The SLO value objects: names, validation, per-request limits for goodput."""

import pytest

from servesize.core.simulation import SLO
from servesize.core.slo import AttainmentTarget, LatencyTarget, ServiceLevelObjective


def test_target_name_carries_unit_and_statistic() -> None:
    assert LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0).name == "ttft_s.p95"
    assert LatencyTarget(metric="itl", statistic="mean", limit_s=0.1).name == "itl_s.mean"


def test_an_slo_without_any_target_is_refused() -> None:
    with pytest.raises(ValueError, match="targets"):
        ServiceLevelObjective(max_failure_rate=0.01)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"metric": "ttft", "statistic": "p95", "limit_s": 0.0}, "limit_s"),
        ({"metric": "ttft", "statistic": "p95", "limit_s": float("inf")}, "limit_s"),
        ({"metric": "ttft", "statistic": "p42", "limit_s": 1.0}, "statistic"),
        ({"metric": "latency", "statistic": "p95", "limit_s": 1.0}, "metric"),
    ],
)
def test_bad_latency_targets_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        LatencyTarget(**kwargs)  # type: ignore[arg-type]


def test_bad_objectives_name_the_field() -> None:
    target = LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0)
    with pytest.raises(ValueError, match="max_failure_rate"):
        ServiceLevelObjective(targets=(target,), max_failure_rate=1.0)
    with pytest.raises(ValueError, match="min_throughput_requests_per_s"):
        ServiceLevelObjective(targets=(target,), min_throughput_requests_per_s=0.0)
    with pytest.raises(ValueError, match="given twice"):
        ServiceLevelObjective(targets=(target, target))
    with pytest.raises(ValueError, match="goal"):
        AttainmentTarget(goal=1.5, ttft_s=1.0)
    with pytest.raises(ValueError, match="needs a limit"):
        AttainmentTarget(goal=0.9)


def test_request_slo_takes_the_tightest_limit_per_metric() -> None:
    slo = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0),
            LatencyTarget(metric="ttft", statistic="p50", limit_s=0.4),
            LatencyTarget(metric="itl", statistic="p99", limit_s=0.01),
            LatencyTarget(metric="e2e", statistic="p99", limit_s=30.0),
        ),
        attainment=AttainmentTarget(goal=0.9, ttft_s=0.5, tpot_s=0.05),
    )
    # ttft: min(1.0, 0.4, 0.5); tpot only from the attainment; ITL is per token, not per request.
    assert slo.request_slo() == SLO(ttft_s=0.4, tpot_s=0.05, e2e_s=30.0)


def test_request_slo_is_none_without_per_request_limits() -> None:
    only_itl = ServiceLevelObjective(
        targets=(LatencyTarget(metric="itl", statistic="p99", limit_s=0.2),)
    )
    assert only_itl.request_slo() is None
