"""Loading the packaged H100 tables: units, keys, and exact reproduction of measured points."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.calibration import (
    H100_DATA_DIRECTORY,
    load_attention_tables,
    load_collective_tables,
    load_gemm_tables,
    load_measured_profile,
    load_moe_tables,
)
from servesize.core.steptime import GemmTable, MeasuredProfile


@cache
def profile() -> MeasuredProfile:
    return load_measured_profile()


def _csv(name: str) -> list[dict[str, str]]:
    with (H100_DATA_DIRECTORY / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def _gemm(engine: str, dtype: str) -> GemmTable:
    table = profile().gemm_table(dtype, engine)
    assert table is not None
    assert table.engine == engine
    return table


def test_every_table_family_is_loaded() -> None:
    p = profile()
    assert {(t.engine, t.dtype) for t in p.gemm} == {
        ("trtllm", "bf16"),
        ("trtllm", "fp8"),
        ("vllm", "bf16"),
        ("vllm", "fp8"),
    }
    assert {(t.phase, t.mechanism) for t in p.attention} == {
        ("decode", "gqa"),
        ("context", "gqa"),
        ("decode", "mla"),
        ("context", "mla"),
    }
    assert {t.num_experts for t in p.moe} == {8, 128}
    assert {(t.op, t.num_gpus) for t in p.collectives} >= {("all_reduce", 2), ("all_reduce", 8)}


def test_gemm_rows_are_reproduced_exactly_in_seconds() -> None:
    for row in _csv("gemm.csv")[::37]:
        dtype = "bf16" if row["gemm_dtype"] == "bfloat16" else "fp8"
        table = _gemm(row["backend"], dtype)
        index = table.shape_index(int(row["n"]), int(row["k"]))
        assert index is not None
        got = table.latency([float(row["m"])], index)[0]
        assert got == float(row["latency_ms"]) * 1e-3


def test_decode_attention_length_counts_the_new_token() -> None:
    tables = load_attention_tables(H100_DATA_DIRECTORY / "decode_attention_gqa.csv", phase="decode")
    for row in _csv("decode_attention_gqa.csv")[::53]:
        if row["attn_dtype"] != "bfloat16":
            continue
        kv = "bf16" if row["kv_cache_dtype"] == "bfloat16" else "fp8"
        (table,) = [
            t
            for t in tables
            if t.engine == row["backend"]
            and (t.num_heads, t.num_kv_heads, t.kv_dtype)
            == (int(row["num_heads"]), int(row["num_key_value_heads"]), kv)
        ]
        got = table.latency([float(row["batch_size"])], [float(row["step"]) + 1])[0]
        assert got == float(row["latency_ms"]) * 1e-3


def test_collective_sizes_are_bytes_of_16_bit_elements() -> None:
    (table,) = [
        t
        for t in load_collective_tables(H100_DATA_DIRECTORY / "collectives.csv")
        if (t.op, t.implementation, t.num_gpus) == ("all_reduce", "custom", 2)
    ]
    # TensorRT-LLM custom all-reduce of 128 bf16 elements on 2 GPUs: 2.662 us.
    assert table.message_bytes[0] == 256.0
    assert table.latency_s[0] == pytest.approx(2.662e-6, rel=1e-3)


def test_moe_tables_keep_shape_and_parallelism() -> None:
    tables = load_moe_tables(H100_DATA_DIRECTORY / "moe.csv")
    mixtral = [
        t
        for t in tables
        if t.num_experts == 8
        and t.expert_parallel_size == 1
        and t.tensor_parallel_size == 1
        and t.dtype == "bf16"
        and t.distribution == "balanced"
    ]
    (table,) = mixtral
    assert (table.hidden_size, table.intermediate_size, table.experts_per_token) == (4096, 14336, 2)
    # One token through two 4096 x 14336 gated experts: 0.2615 ms in moe.csv.
    assert table.latency([1.0])[0] == pytest.approx(0.2615e-3, rel=1e-3)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1.0, max_value=16384.0), st.floats(min_value=1.0, max_value=16384.0))
def test_gemm_interpolation_stays_between_neighbouring_points(a: float, b: float) -> None:
    table = _gemm("vllm", "bf16")
    row = table.shape_index(8192, 8192)
    assert row is not None
    for m in (a, b):
        j = int(np.clip(np.searchsorted(table.m, m, side="right") - 1, 0, len(table.m) - 2))
        lo, hi = sorted(table.latency_s[row, j : j + 2])
        value = table.latency([m], row)[0]
        assert lo * (1 - 1e-12) <= value <= hi * (1 + 1e-12)


def test_gemm_loader_needs_a_known_dtype(tmp_path: Path) -> None:
    path = tmp_path / "gemm.csv"
    path.write_text(
        "backend,backend_version,gemm_dtype,m,n,k,latency_ms\ntrtllm,1,int3,1,2,2,0.1\n"
    )
    with pytest.raises(ValueError, match="unknown dtype"):
        load_gemm_tables(path)
