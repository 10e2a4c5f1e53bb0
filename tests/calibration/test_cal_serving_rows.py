"""Serving rows: units, catalogue mapping, exclusions and their reasons."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from servesize.calibration import (
    ServingMeasurement,
    catalogue_id_for,
    load_serving_measurements,
    reference_gpu,
    resolve_cases,
)
from servesize.core.architecture import Architecture, parse_architecture

ROOT = Path(__file__).resolve().parents[2]


@cache
def rows() -> tuple[ServingMeasurement, ...]:
    return load_serving_measurements()


@cache
def catalogue(*names: str) -> dict[str, Architecture]:
    out = {}
    for name in names:
        config = json.loads(
            (ROOT / "servesize" / "data" / "models" / f"{name.replace('/', '--')}.json").read_text()
        )
        out[name] = parse_architecture(config, name=name)
    return out


def test_milliseconds_become_seconds() -> None:
    first = next(r for r in rows() if r.model == "meta-llama/Llama-3.1-8B-Instruct")
    assert first.engine == "trtllm"
    assert first.mode == "agg"
    assert 0.001 < first.tpot_s < 0.1
    assert first.concurrency is not None


def test_disaggregated_rows_take_concurrency_from_the_source_note() -> None:
    row = next(r for r in rows() if r.row_id.endswith("_c6_cfg494"))
    assert row.mode == "disagg"
    assert row.concurrency == 6


@pytest.mark.parametrize(
    ("benchmarked", "expected"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
        ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"),
        ("Qwen/Qwen3-32B", None),
    ],
)
def test_benchmarked_models_map_to_the_architecture_they_share(
    benchmarked: str, expected: str | None
) -> None:
    available = [
        "meta-llama/Llama-3.1-8B",
        "Qwen/Qwen3-235B-A22B",
        "deepseek-ai/DeepSeek-V3",
    ]
    assert catalogue_id_for(benchmarked, available) == expected


def test_exclusions_carry_their_reason() -> None:
    archs = catalogue("meta-llama/Llama-3.1-8B", "openai/gpt-oss-120b")
    cases, excluded = resolve_cases(rows(), archs, reference_gpu())
    reasons = {reason for _, reason in excluded}
    assert "disaggregated pools (see module docstring)" in reasons
    assert "Qwen/Qwen3-32B is not in the catalogue" in reasons
    # gpt-oss at concurrency 512 reports a TPOT below the HBM bound of 512 resident sequences.
    held = [r for r, why in excluded if why.startswith("TPOT below the HBM bound")]
    assert held
    assert all(r.concurrency == 512 for r in held)
    assert {c.model_id for c in cases} == set(archs)
    assert all(c.weight_dtype is None for c in cases)  # bf16 Llama, MXFP4 gpt-oss checkpoints


def test_fp8_rows_quantize_a_bf16_checkpoint() -> None:
    archs = catalogue("meta-llama/Llama-3.1-70B")
    cases, _ = resolve_cases(rows(), archs, reference_gpu())
    assert cases
    assert {c.weight_dtype for c in cases} == {"fp8_e4m3"}
