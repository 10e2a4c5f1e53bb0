"""The engines' speculative-decoding options for a deployment's speculation.

- vLLM: ``--speculative-config`` JSON (``vllm/config/speculative.py: SpeculativeConfig``:
  ``method`` ``eagle3`` / ``mtp`` / ``ngram`` / ``draft_model``, ``model``,
  ``num_speculative_tokens``; n-gram with ``prompt_lookup_max``/``prompt_lookup_min``);
- SGLang 0.5.1: ``--speculative-algorithm EAGLE3`` (MTP: ``NEXTN``),
  ``--speculative-draft-model-path``, ``--speculative-num-steps k``,
  ``--speculative-eagle-topk 1``, ``--speculative-num-draft-tokens k + 1`` (a top-1 chain of
  ``k`` drafts plus the root, ``ServerArgs``); 0.5.1 has no n-gram or separate-draft-model
  algorithm, so those are None;
- TensorRT-LLM: ``speculative_config`` of the extra options YAML (``decoding_type`` ``Eagle``
  with ``eagle3_one_model``, ``MTP`` with ``num_nextn_predict_layers``, ``NGram``,
  ``DraftTarget``; ``tensorrt_llm/llmapi/llm_args.py``).
"""

from __future__ import annotations

import json

from servesize.core.speculative.decoding import SpeculativeDecoding

__all__ = [
    "DRAFT_PLACEHOLDER",
    "sglang_speculative_args",
    "trtllm_speculative_config",
    "vllm_speculative_args",
]

DRAFT_PLACEHOLDER = "<eagle3-head-checkpoint>"
"""Stands for an EAGLE-3 head the deployment did not name."""
NGRAM_LOOKUP_MAX = 4
"""Longest prompt n-gram matched (vLLM's examples use 4)."""


def _draft(spec: SpeculativeDecoding) -> str:
    return spec.draft_model or DRAFT_PLACEHOLDER


def vllm_speculative_args(spec: SpeculativeDecoding) -> list[str]:
    """``["--speculative-config", JSON]``."""
    config: dict[str, object] = {"method": spec.method, "num_speculative_tokens": spec.k}
    if spec.method in ("eagle3", "draft_model"):
        config["model"] = _draft(spec)
    if spec.method == "ngram":
        config["prompt_lookup_max"] = NGRAM_LOOKUP_MAX
        config["prompt_lookup_min"] = 1
    return ["--speculative-config", json.dumps(config, separators=(",", ":"))]


def sglang_speculative_args(spec: SpeculativeDecoding) -> list[str] | None:
    """SGLang's flags, or None where 0.5.1 has no such algorithm (n-gram, draft model)."""
    if spec.method not in ("eagle3", "mtp"):
        return None
    args = ["--speculative-algorithm", "EAGLE3" if spec.method == "eagle3" else "NEXTN"]
    if spec.method == "eagle3":
        args += ["--speculative-draft-model-path", _draft(spec)]
    args += ["--speculative-num-steps", str(spec.k), "--speculative-eagle-topk", "1"]
    args += ["--speculative-num-draft-tokens", str(spec.k + 1)]
    return args


def trtllm_speculative_config(spec: SpeculativeDecoding, mtp_layers: int = 1) -> dict[str, object]:
    """The ``speculative_config`` mapping of the extra options YAML."""
    if spec.method == "mtp":
        return {"decoding_type": "MTP", "num_nextn_predict_layers": max(spec.k, mtp_layers)}
    if spec.method == "ngram":
        return {
            "decoding_type": "NGram",
            "max_draft_len": spec.k,
            "max_matching_ngram_size": NGRAM_LOOKUP_MAX,
        }
    if spec.method == "draft_model":
        return {
            "decoding_type": "DraftTarget",
            "max_draft_len": spec.k,
            "speculative_model_dir": _draft(spec),
        }
    return {
        "decoding_type": "Eagle",
        "max_draft_len": spec.k,
        "speculative_model_dir": _draft(spec),
        "eagle3_one_model": True,
    }
