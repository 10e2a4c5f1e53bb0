"""Measured-table interpolation: exact at table points, monotone between neighbours."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.steptime import AttentionTable, CollectiveTable, GemmTable, MeasuredProfile
from servesize.core.steptime.interpolation import bilinear_loglog, loglog_interp
from servesize.core.steptime.tables import fill_grid_loglog

M = np.array([1.0, 16.0, 256.0, 4096.0])
GEMM = GemmTable(
    dtype="bf16",
    engine="vllm",
    source="test",
    m=M,
    n=np.array([4096.0, 8192.0]),
    k=np.array([4096.0, 4096.0]),
    latency_s=np.array([[16e-6, 17e-6, 20e-6, 170e-6], [30e-6, 31e-6, np.nan, 330e-6]]),
)
ATTENTION = AttentionTable(
    phase="decode",
    mechanism="gqa",
    engine="vllm",
    source="test",
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    kv_dtype="bf16",
    batch=np.array([1.0, 8.0, 64.0]),
    length=np.array([128.0, 1024.0, 8192.0]),
    latency_s=np.array([[9e-6, 10e-6, 25e-6], [10e-6, 28e-6, 110e-6], [24e-6, 110e-6, np.nan]]),
)


def test_gemm_table_points_are_reproduced_exactly() -> None:
    for row, (n, k) in enumerate(zip(GEMM.n, GEMM.k, strict=True)):
        assert GEMM.shape_index(int(n), int(k)) == row
        measured = np.isfinite([[16e-6, 17e-6, 20e-6, 170e-6], [30e-6, 31e-6, np.nan, 330e-6]][row])
        np.testing.assert_array_equal(GEMM.latency(M, row)[measured], GEMM.latency_s[row][measured])


def test_a_missing_gemm_cell_is_filled_between_its_neighbours() -> None:
    filled = GEMM.latency_s[1, 2]
    assert 31e-6 < filled < 330e-6


def test_attention_table_points_are_reproduced_exactly() -> None:
    b, length = np.meshgrid(ATTENTION.batch, ATTENTION.length, indexing="ij")
    got = ATTENTION.latency(b.ravel(), length.ravel()).reshape(b.shape)
    measured = np.isfinite(
        np.array([[9e-6, 10e-6, 25e-6], [10e-6, 28e-6, 110e-6], [24e-6, 110e-6, np.nan]])
    )
    np.testing.assert_allclose(got[measured], ATTENTION.latency_s[measured], rtol=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.floats(min_value=1.0, max_value=4096.0), st.floats(min_value=1.0, max_value=4096.0))
def test_gemm_interpolation_is_monotone_between_points(a: float, b: float) -> None:
    low, high = sorted((a, b))
    t_low, t_high = GEMM.latency([low, high], 0)
    # Row 0 is non-decreasing in m, so is its interpolant.
    assert t_low <= t_high * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(st.floats(min_value=1.0, max_value=64.0), st.floats(min_value=128.0, max_value=8192.0))
def test_attention_interpolation_stays_within_its_cell(batch: float, length: float) -> None:
    value = ATTENTION.latency([batch], [length])[0]
    i = min(int(np.searchsorted(ATTENTION.batch, batch, side="right")) - 1, 1)
    j = min(int(np.searchsorted(ATTENTION.length, length, side="right")) - 1, 1)
    corners = ATTENTION.latency_s[i : i + 2, j : j + 2]
    assert corners.min() * (1 - 1e-12) <= value <= corners.max() * (1 + 1e-12)


def test_loglog_extrapolates_proportionally_above_and_holds_below() -> None:
    xp = np.array([2.0, 4.0])
    fp = np.array([3.0, 5.0])
    assert loglog_interp([1.0, 8.0], xp, fp).tolist() == pytest.approx([3.0, 10.0])


def test_bilinear_extrapolates_along_length_only() -> None:
    grid = np.array([[1.0, 2.0], [4.0, 8.0]])
    xp = yp = np.array([1.0, 2.0])
    assert bilinear_loglog([4.0], [4.0], xp, yp, grid)[0] == pytest.approx(16.0)


def test_an_empty_grid_is_rejected() -> None:
    with pytest.raises(ValueError, match="no measured cell"):
        fill_grid_loglog(np.array([1.0, 2.0]), np.full((1, 2), np.nan))


def test_profile_prefers_the_engine_own_tables() -> None:
    other = GemmTable(
        dtype="bf16",
        engine="trtllm",
        source="other",
        m=M,
        n=GEMM.n,
        k=GEMM.k,
        latency_s=GEMM.latency_s,
    )
    coll = CollectiveTable(
        op="all_reduce",
        implementation="nccl",
        source="c",
        num_gpus=2,
        message_bytes=np.array([1e3, 1e6]),
        latency_s=np.array([6e-6, 20e-6]),
    )
    profile = MeasuredProfile(name="p", gemm=(other, GEMM), collectives=(coll,))
    assert profile.gemm_table("bf16", "vllm") is GEMM
    assert profile.gemm_table("bf16", "sglang") is other
    assert profile.gemm_table("fp8", "vllm") is None
    assert profile.collective("all_reduce", 2, "custom") is coll
    assert profile.collective("all_reduce", 4, "custom") is None
