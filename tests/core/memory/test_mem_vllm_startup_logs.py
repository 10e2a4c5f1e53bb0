"""The memory plan against vLLM start-up logs collected from public sources.

The logs (``servesize/data/validation/vllm_startup_logs.json``, collected 2026-12-02) are
independent measurements: nothing is fitted on the rows without ``calibration_overlap``. Every
logged figure (weights, activation peak, "Available KV cache memory", "GPU KV cache size",
"Maximum concurrency") must be within 2 % of the plan, except the figures listed in
``KNOWN_GAPS``, whose error is pinned to what it is today so that it cannot silently grow;
each gap says why it is not closed.
"""

from __future__ import annotations

import pytest

from bench.bench_kv_capacity import Comparison, comparisons, load_logs

TOLERANCE = 0.02

_KV = ("available_kv_gib", "kv_tokens", "max_concurrency")
KNOWN_GAPS: dict[tuple[str, str], tuple[float, str]] = {
    **{
        ("v0.6.4-rtx3090-llama3.1-8b-20k", q): (
            0.11,
            "v0.6.4 charges all non-torch memory, the CUDA context included; the RTX 3090's "
            "(0.35 GiB logged, in use before profiling: initial_memory_usage 15.34 - weights "
            "14.99 GiB) is smaller than the H100 constants (0.61 + 0.13 GiB), and the context is "
            "not derived per GPU",
        )
        for q in _KV
    },
    **{
        ("v0.6.4-rtx3090-llama3.1-8b-29k", q): (0.145, "as the 20k log: RTX 3090 CUDA context")
        for q in _KV
    },
    ("v0.6.4-rtx3090-llama3.1-8b-35k", "activation_gib"): (
        19.0,
        "V0 with chunked prefill (512-token budget): the logged peak, 0.06 GiB, is the "
        "forward pass or one bf16 logits tensor of 256 rows, without the sampler working set "
        "(1.17 GiB) that the v0.6.5 H100 log (1.26 GiB at 8,192 tokens) does show; which "
        "mechanism removes it is not established",
    ),
    ("v0.6.5-h100-llama3-8b-tp1", "available_kv_gib"): (
        0.035,
        "the log (a PR sanity check) reports 1.79 GiB of non-torch memory at TP 1 (3.58 GiB at "
        "TP 2): before v0.7.0 (PR #11809) torch memory was allocated_bytes.all.current, so what "
        "the caching allocator kept reserved after empty_cache counted as non-torch; not priced",
    ),
    **{
        ("v0.9.2-h100-qwen3-235b-a22b-fp8-tp4", q): (
            0.245,
            "1.8 GiB per GPU unexplained; the run used an LMCache KV connector",
        )
        for q in ("available_kv_gib", "kv_tokens")
    },
    **{
        (log, q): (
            0.03,
            "0.85 GiB per GPU more than predicted at TP 2 and TP 4 in this study only (the "
            "llm-d TP 2 run of the same model is within 0.2 %); unexplained",
        )
        for log in ("lmcache-h100-qwen3-32b-tp2", "lmcache-h100-llama3.1-70b-tp4")
        for q in _KV
    },
    ("v0.11.0-h100-gpt-oss-120b-util0.95-mnbt1024", "available_kv_gib"): (
        0.085,
        "0.14 GiB on a 1.71 GiB budget with the Marlin layout the pip wheel implies (the "
        "backend is not logged); 89 % with the Triton layout",
    ),
    ("llmd-h100-mistral-small-3.2-24b", "activation_gib"): (
        1.35,
        "multimodal: the logged peak (2.12 GiB) is below the text-only sampler estimate; the "
        "vision encoder's profile run is not modelled",
    ),
    **{
        ("llmd-h100-mistral-small-3.2-24b", q): (0.075, "multimodal, as its activation")
        for q in _KV
    },
}

ROWS = comparisons()


def _bound(row: Comparison) -> float:
    return KNOWN_GAPS.get((row.log_id, row.quantity), (TOLERANCE, ""))[0]


def test_enough_independent_logs() -> None:
    logs = load_logs()
    independent = [log for log in logs if not log.get("calibration_overlap")]
    assert len(independent) >= 9
    assert len({log["engine_version"] for log in logs}) >= 4
    assert {row.quantity for row in ROWS} == {
        "weights_gib",
        "activation_gib",
        "available_kv_gib",
        "kv_tokens",
        "max_concurrency",
    }
    for log in logs:
        assert log["source"]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.log_id}:{r.quantity}" for r in ROWS])
def test_logged_figure(row: Comparison) -> None:
    assert abs(row.error) <= _bound(row), (
        f"{row.log_id} {row.quantity}: measured {row.measured}, predicted {row.predicted:.4g}"
    )


def test_known_gaps_are_still_gaps() -> None:
    # Once a gap is closed it must leave the list (and be held to 2 %).
    for row in ROWS:
        if (row.log_id, row.quantity) in KNOWN_GAPS:
            assert abs(row.error) > TOLERANCE, f"{row.log_id} {row.quantity} is now within 2 %"


def test_v0_activation_peaks_match_the_logs() -> None:
    # The V0 profile run over max(max_model_len, 2048) tokens: 2.07, 2.99 and 1.26 GiB logged,
    # 1.26 at TP 2 too (the chunked-prefill run at 35,000 tokens is a known gap).
    v0 = [
        r
        for r in ROWS
        if r.quantity == "activation_gib"
        and r.log_id.startswith("v0.6")
        and (r.log_id, r.quantity) not in KNOWN_GAPS
    ]
    assert len(v0) == 4
    assert all(abs(r.error) <= 0.01 for r in v0)
