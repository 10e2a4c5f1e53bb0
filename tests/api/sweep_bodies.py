"""Small sweeps shared by the embedded and the broker job tests: Tier A only (no verifying
simulation), one candidate per combination, so each sizing takes well under a second."""

from __future__ import annotations

from typing import Any

MODELS = ["meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-0.6B"]
GPUS = ["l40s", "h100-sxm"]
PRICES = {"l40s": 1.0, "h100-sxm": 2.5}
TRAFFIC: dict[str, Any] = {"rate_per_s": 2.0, "input_tokens": 512, "output_tokens": 128}
SLO: dict[str, Any] = {"ttft_s": {"p95": 0.5}, "tpot_s": {"p95": 0.05}}
CANDIDATES: dict[str, Any] = {
    "tensor_parallel": [1],
    "max_num_batched_tokens": [8192],
    "kv_cache_dtype": ["auto"],
}


def small_sweep(**extra: Any) -> dict[str, Any]:
    """2 models × 2 GPUs × 1 forecast × 1 SLO = 4 sizings."""
    return {
        "models": MODELS,
        "hardware": GPUS,
        "traffic": [TRAFFIC],
        "slos": [SLO],
        "candidates": CANDIDATES,
        "prices": PRICES,
        "verify_top": 0,
    } | extra


def without_timing(value: Any) -> Any:
    """A body without the fields that differ run to run (``elapsed_s``) or call to call
    (``cached``: the sizing cache of the synchronous endpoint)."""
    if isinstance(value, dict):
        return {
            k: without_timing(v)
            for k, v in value.items()
            if not k.endswith("elapsed_s") and k != "cached"
        }
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value
