"""Held-out residuals: the coverage check worked by hand, and the shipped interval file."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from servesize.api.uncertainty import INTERVALS_JSON
from servesize.calibration import E2E_SERVING_CSV
from servesize.calibration.holdout import HeldOutRow, coverage_check, intervals_of


def _row(model: str, r: float) -> HeldOutRow:
    # One output token: E2E = TTFT, so all three residuals are r.
    return HeldOutRow(
        split="model",
        engine="vllm",
        engine_version="0.12.0",
        model_id=model,
        family="dense",
        gpu="H100 SXM",
        input_tokens=1024,
        output_tokens=1,
        concurrency=1,
        measured=(math.exp(r), math.exp(r)),
        predicted=(1.0, 1.0),
    )


ROWS = [_row("A", r) for r in (0.0, 0.1, 0.2, 0.3, 0.4)] + [_row("B", r) for r in (0.0, 0.05, 0.5)]


def test_residual_is_the_log_of_measured_over_predicted() -> None:
    assert ROWS[1].residual("ttft_s") == pytest.approx(0.1)
    assert ROWS[1].residual("e2e_s") == pytest.approx(0.1)


def test_intervals_of_rows_by_hand() -> None:
    table = intervals_of(ROWS, coverages=(0.8,), min_rows=1)
    # All 8 residuals sorted: 0, 0, .05, .1, .2, .3, .4, .5; h = 7 q.
    # Q(0.1): h = 0.7 → 0 + 0.7·0 = 0; Q(0.9): h = 6.3 → 0.4 + 0.3·0.1 = 0.43.
    band = table.latency("ttft_s", 1.0, engine="vllm", family="dense", coverage=0.8)
    assert band is not None
    assert (band.low, band.high) == pytest.approx((1.0, math.exp(0.43)))
    assert set(table.groups) == {"vllm/dense", "vllm/*", "*/*"}


def test_coverage_leaves_each_model_out_of_its_own_interval() -> None:
    cov = coverage_check(ROWS, key=lambda r: "all", coverages=(0.8,), min_rows=1)["all"]
    # Without A (from B's 0, .05, .5): [Q(.1), Q(.9)] = [0.01, 0.41]; A's .1 .2 .3 .4 inside: 4.
    # Without B (from A's five): [0.04, 0.36]; of B's 0, .05, .5 only .05 inside: 1.
    assert cov.rows == 8
    assert cov.inside == {m: {0.8: 5} for m in ("ttft_s", "tpot_s", "e2e_s")}


def test_shipped_intervals_match_the_calibration_file() -> None:
    """Regenerate with ``python -m bench.accuracy --write-intervals`` when this fails."""
    data = json.loads(INTERVALS_JSON.read_text())
    digest = hashlib.sha256(E2E_SERVING_CSV.read_bytes()).hexdigest()
    assert data["generated"]["inputs"]["e2e_serving.csv"] == f"sha256:{digest}"
    residuals = INTERVALS_JSON.parent / "held_out_residuals.csv"
    digest = hashlib.sha256(residuals.read_bytes()).hexdigest()
    assert data["generated"]["inputs"]["held_out_residuals.csv"] == f"sha256:{digest}"
    assert data["domain"]["gpus"] == ["H100 SXM"]
    assert set(data["domain"]["engines"]) == {"sglang", "trtllm", "vllm"}
    assert "0.12.0" in data["domain"]["engines"]["vllm"]["versions"]
    for key, group in data["groups"].items():
        assert group["rows"] > 0, key
        for metric, bands in group["bands"].items():
            (lo80, hi80), (lo95, hi95) = bands["0.8"], bands["0.95"]
            assert lo95 <= lo80 <= hi80 <= hi95, (key, metric)
