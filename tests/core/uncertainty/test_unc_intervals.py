"""Prediction intervals: quantiles and bands worked out by hand, group fallback, domain."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from servesize.catalog import ModelCatalog
from servesize.core.uncertainty import (
    EngineDomain,
    PredictionIntervals,
    ValidatedDomain,
    domain_warnings,
    empirical_quantile,
    model_family,
    residual_group,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"

# Five log residuals; sorted they are -0.3, -0.1, 0.0, 0.2, 0.5.
RESIDUALS = [0.2, -0.3, 0.5, 0.0, -0.1]


def test_type_7_quantiles_by_hand() -> None:
    # h = (n - 1) q = 4 q. q = 0.1: h = 0.4, -0.3 + 0.4 (-0.1 + 0.3) = -0.22.
    assert empirical_quantile(RESIDUALS, 0.1) == pytest.approx(-0.22)
    # q = 0.9: h = 3.6, 0.2 + 0.6 (0.5 - 0.2) = 0.38.
    assert empirical_quantile(RESIDUALS, 0.9) == pytest.approx(0.38)
    # q = 0.5: h = 2, the middle order statistic.
    assert empirical_quantile(RESIDUALS, 0.5) == 0.0
    assert empirical_quantile(RESIDUALS, 0.0) == -0.3
    assert empirical_quantile(RESIDUALS, 1.0) == 0.5
    with pytest.raises(ValueError, match="no values"):
        empirical_quantile([], 0.5)


def _table(min_rows: int = 5) -> PredictionIntervals:
    five = dict.fromkeys(("ttft_s", "tpot_s", "e2e_s"), RESIDUALS)
    three = {m: [0.0, 0.1, 0.2] for m in ("ttft_s", "tpot_s", "e2e_s")}
    wide = {m: [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0] for m in ("ttft_s", "tpot_s", "e2e_s")}
    groups = {
        "vllm/moe": residual_group("vllm/moe", five, [0.8], models=["m1"]),
        "vllm/dense": residual_group("vllm/dense", three, [0.8]),
        "vllm/*": residual_group("vllm/*", wide, [0.8]),
        "*/*": residual_group("*/*", five, [0.8]),
    }
    return PredictionIntervals(groups=groups, coverages=(0.8,), min_rows=min_rows)


def test_latency_band_is_the_prediction_times_exp_of_the_quantiles() -> None:
    band = _table().latency("ttft_s", 2.0, engine="vllm", family="moe", coverage=0.8)
    assert band is not None
    # 80 %: Q(0.1) = -0.22 and Q(0.9) = 0.38 (above): [2 e^-0.22, 2 e^0.38] = [1.605, 2.925].
    assert band.low == pytest.approx(2.0 * math.exp(-0.22))
    assert band.high == pytest.approx(2.0 * math.exp(0.38))
    assert band.low == pytest.approx(1.6050, abs=1e-4)
    assert band.coverage == 0.8
    assert band.basis == "vllm/moe (5 held-out rows)"


def test_rate_band_inverts_the_latency_band() -> None:
    band = _table().rate("e2e_s", 10.0, engine="vllm", family="moe", coverage=0.8)
    assert band is not None
    # A rate k / T: [10 e^-0.38, 10 e^0.22] = [6.839, 12.461].
    assert band.low == pytest.approx(6.8386, abs=1e-4)
    assert band.high == pytest.approx(12.4608, abs=1e-4)


def test_small_groups_fall_back_to_the_engine_then_to_all_rows() -> None:
    table = _table()
    # vllm/dense has 3 rows < 5: the engine's 6 rows, whose 80 % band is Q(0.1) = -1 (h = 0.5
    # between two -1s) and Q(0.9) = 1.
    band = table.latency("tpot_s", 1.0, engine="vllm", family="dense", coverage=0.8)
    assert band is not None
    assert band.basis.startswith("vllm/*")
    assert (band.low, band.high) == pytest.approx((math.exp(-1.0), math.exp(1.0)))
    other = table.latency("tpot_s", 1.0, engine="sglang", family="dense", coverage=0.8)
    assert other is not None
    assert other.basis.startswith("*/*")
    # With min_rows 3 the family's own rows are used.
    own = _table(min_rows=3).latency("tpot_s", 1.0, engine="vllm", family="dense", coverage=0.8)
    assert own is not None
    assert own.basis.startswith("vllm/dense")


def test_a_model_without_residuals_in_its_group_takes_every_row() -> None:
    table = _table()
    known = table.latency("ttft_s", 1.0, engine="vllm", family="moe", coverage=0.8, model="m1")
    new = table.latency("ttft_s", 1.0, engine="vllm", family="moe", coverage=0.8, model="m2")
    assert known is not None
    assert new is not None
    assert known.basis.startswith("vllm/moe")
    assert new.basis.startswith("*/*")


def test_no_band_for_unknown_coverage_or_non_finite_prediction() -> None:
    table = _table()
    assert table.latency("ttft_s", 1.0, engine="vllm", family="moe", coverage=0.95) is None
    assert table.latency("ttft_s", math.inf, engine="vllm", family="moe", coverage=0.8) is None
    assert table.rate("e2e_s", 0.0, engine="vllm", family="moe", coverage=0.8) is None


def test_from_mapping_reads_the_json_layout() -> None:
    table = PredictionIntervals.from_mapping(
        {
            "coverages": [0.8],
            "min_rows": 1,
            "groups": {
                "*/*": {"rows": 4, "models": ["a"], "bands": {"ttft_s": {"0.8": [-0.5, 0.5]}}}
            },
        }
    )
    band = table.latency("ttft_s", 1.0, engine="vllm", family="dense", coverage=0.8)
    assert band is not None
    assert (band.low, band.high) == pytest.approx((math.exp(-0.5), math.exp(0.5)))


DOMAIN = ValidatedDomain(
    gpus=("H100 SXM",),
    engines={
        "vllm": EngineDomain(
            versions=("0.12.0",),
            families=("dense", "hybrid"),
            input_tokens=(128, 8192),
            output_tokens=(64, 2048),
            concurrency=(1, 256),
            models=("meta-llama/Llama-3.1-70B",),
        )
    },
    new_model_coverage={0.8: {"ttft_s": 0.58, "tpot_s": 0.28, "e2e_s": 0.53}},
)


def _warn(**overrides: object) -> tuple[str, ...]:
    request: dict[str, object] = {
        "gpu": "H100 SXM",
        "engine": "vllm",
        "engine_version": "0.12.0",
        "family": "dense",
        "model": "meta-llama/Llama-3.1-70B",
        "input_tokens": [1024],
        "output_tokens": [256],
        "concurrency": [32],
    }
    return domain_warnings(DOMAIN, **(request | overrides))  # type: ignore[arg-type]


def test_inside_the_domain_no_warning() -> None:
    assert _warn() == ()
    assert _warn(gpu="h100-sxm") == ()  # the id matches the datasheet name


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"gpu": "H200 SXM"}, "no serving measurements on H200 SXM"),
        ({"engine_version": "0.21.0"}, "vllm 0.21.0 was never calibrated"),
        ({"family": "mla"}, "no vllm calibration rows for mla models"),
        ({"input_tokens": [100_000]}, "input length 100000 outside the calibrated 128-8192"),
        ({"output_tokens": [16]}, "output length 16 outside the calibrated 64-2048"),
        ({"concurrency": [1024]}, "concurrency 1024 outside the calibrated 1-256"),
        ({"engine": "trtllm"}, "engine trtllm has no calibration rows"),
        (
            {"model": "mistralai/Mistral-7B-v0.3"},
            "no held-out vllm rows: its band is borrowed from other models; on models left out "
            "of the residuals the 80% bands held only TTFT 58%, TPOT 28%, E2E 53%",
        ),
    ],
)
def test_each_way_out_of_the_domain_warns(overrides: dict[str, object], words: str) -> None:
    warnings = _warn(**overrides)
    assert len(warnings) == 1
    assert words in warnings[0]


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("meta-llama/Llama-3.1-8B", "dense"),
        ("Qwen/Qwen3-235B-A22B", "moe"),
        ("openai/gpt-oss-120b", "hybrid"),  # alternating sliding-window layers (and experts)
        ("deepseek-ai/DeepSeek-V3", "mla"),
        ("google/gemma-2-9b", "hybrid"),  # sliding window on every other layer
    ],
)
def test_model_family(model: str, family: str) -> None:
    assert model_family(ModelCatalog(MODELS).architecture(model)) == family
