"""Token-length distributions: support, exact means, validation."""

import math

import numpy as np
import pytest
from scipy import stats

from servesize.core.traffic import (
    FixedLength,
    GeometricLength,
    HistogramLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    UniformLength,
)

SAMPLES = 200_000


def _rng() -> np.random.Generator:
    return np.random.default_rng(20_240_611)


def test_fixed_length_repeats_the_value_without_drawing() -> None:
    rng = _rng()
    state = rng.bit_generator.state
    assert FixedLength(7).sample(3, rng).tolist() == [7, 7, 7]
    assert rng.bit_generator.state == state


def test_uniform_includes_both_ends() -> None:
    values = UniformLength(3, 5).sample(10_000, _rng())
    assert set(values.tolist()) == {3, 4, 5}
    assert UniformLength(3, 5).mean_tokens == 4.0


def test_normal_is_clipped_and_its_mean_accounts_for_the_clip() -> None:
    # N(2, 4²) clipped to [1, 6]: a lot of mass folds onto 1 and some onto 6, so the mean of
    # the clipped variable differs from 2; the exact value is a sum over the support.
    dist = NormalLength(mean_unclipped_tokens=2.0, std_tokens=4.0, min_tokens=1, max_tokens=6)
    values = dist.sample(SAMPLES, _rng())
    assert values.min() == 1
    assert values.max() == 6
    # Standard error of the sample mean: sd <= 2.5 over 200k draws -> ~0.006.
    assert values.mean() == pytest.approx(dist.mean_tokens, abs=0.03)


def test_normal_mean_by_direct_summation() -> None:
    # P(round(X) = k) = Φ(k + 0.5) - Φ(k - 0.5) inside, tails folded onto the bounds.
    dist = NormalLength(mean_unclipped_tokens=10.0, std_tokens=3.0, min_tokens=8, max_tokens=12)
    cdf = stats.norm(10.0, 3.0).cdf
    expected = 8 * cdf(8.5) + sum(k * (cdf(k + 0.5) - cdf(k - 0.5)) for k in range(9, 12))
    expected += 12 * (1 - cdf(11.5))
    assert dist.mean_tokens == pytest.approx(expected, rel=1e-12)


def test_lognormal_matches_requested_mean_and_cv_when_unclipped() -> None:
    dist = LogNormalLength(mean_unclipped_tokens=500.0, cv=0.8, max_tokens=10**7)
    values = dist.sample(SAMPLES, _rng())
    # Rounding shifts the mean by far less than the sampling error (sd 400 / sqrt(2e5) ~ 0.9).
    assert values.mean() == pytest.approx(500.0, abs=5.0)
    assert values.std() / values.mean() == pytest.approx(0.8, abs=0.02)
    assert dist.mean_tokens == pytest.approx(500.0, abs=0.01)


def test_lognormal_sigma_and_mu_follow_the_moment_match() -> None:
    # sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2 / 2
    dist = LogNormalLength(mean_unclipped_tokens=100.0, cv=1.0)
    assert dist.sigma**2 == pytest.approx(math.log(2.0))
    assert dist.mu == pytest.approx(math.log(100.0) - math.log(2.0) / 2)


def test_histogram_with_unit_bins_reproduces_frequencies() -> None:
    dist = HistogramLength(bin_edges_tokens=(10, 11, 12), counts=(3.0, 1.0))
    values = dist.sample(SAMPLES, _rng())
    assert set(values.tolist()) == {10, 11}
    assert np.mean(values == 10) == pytest.approx(0.75, abs=0.005)
    assert dist.mean_tokens == pytest.approx(10.25)


def test_histogram_draws_uniformly_within_a_bin() -> None:
    values = HistogramLength(bin_edges_tokens=(100, 200), counts=(1.0,)).sample(SAMPLES, _rng())
    assert values.min() >= 100
    assert values.max() <= 199
    assert values.mean() == pytest.approx(149.5, abs=0.5)


def test_geometric_moments() -> None:
    dist = GeometricLength(20.0)
    values = dist.sample(SAMPLES, _rng())
    assert values.min() >= 1
    assert values.mean() == pytest.approx(20.0, rel=0.01)
    # E[n^2] = (2 - p) / p^2 = 1.95 * 400 = 780
    assert dist.second_moment_tokens2 == pytest.approx(780.0)
    assert np.mean(values.astype(float) ** 2) == pytest.approx(780.0, rel=0.03)


@pytest.mark.parametrize(
    "dist",
    [
        FixedLength(3),
        UniformLength(1, 9),
        NormalLength(mean_unclipped_tokens=5.0, std_tokens=2.0),
        LogNormalLength(mean_unclipped_tokens=5.0, cv=1.0),
        HistogramLength(bin_edges_tokens=(1, 4), counts=(1.0,)),
        GeometricLength(4.0),
    ],
)
def test_every_distribution_satisfies_the_protocol(dist: LengthDistribution) -> None:
    assert isinstance(dist, LengthDistribution)
    values = dist.sample(100, _rng())
    assert values.dtype == np.int64
    assert values.min() >= 1


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: FixedLength(0), "tokens"),
        (lambda: UniformLength(5, 4), "high_tokens"),
        (lambda: NormalLength(mean_unclipped_tokens=1.0, std_tokens=-1.0), "std_tokens"),
        (lambda: LogNormalLength(mean_unclipped_tokens=0.0, cv=1.0), "mean_unclipped_tokens"),
        (lambda: HistogramLength(bin_edges_tokens=(1, 2), counts=(1.0, 2.0)), "counts"),
        (lambda: GeometricLength(0.5), "mean_tokens"),
    ],
)
def test_invalid_parameters_are_rejected(factory: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        factory()  # type: ignore[operator]
