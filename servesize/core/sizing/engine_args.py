"""Ready-to-paste launch commands for a plan: ``vllm serve`` and SGLang's ``launch_server``.

Flag names are the engines' own: vLLM's from ``vllm/engine/arg_utils.py``
(``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
``--enable-expert-parallel``, ``--max-num-seqs``, ``--max-num-batched-tokens``,
``--gpu-memory-utilization``, ``--kv-cache-dtype``, ``--max-model-len``, ``--kv-transfer-config``),
SGLang's from ``python/sglang/srt/server_args.py`` (``--model-path``, ``--tp``, ``--pp-size``,
``--dp``, ``--ep-size``, ``--mem-fraction-static``, ``--max-running-requests``,
``--chunked-prefill-size``, ``--kv-cache-dtype``, ``--context-length``, ``--disaggregation-mode``).
"""

from __future__ import annotations

import json
from typing import Literal

from servesize.core.memory import ResolvedDeployment

__all__ = ["sglang_args", "vllm_args"]

Role = Literal["both", "prefill", "decode"]
# vLLM's NIXL connector moves KV between prefill and decode instances.
_VLLM_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def _sglang_kv_dtype(element_dtype: str) -> str:
    """SGLang spells fp8 KV ``fp8_e4m3`` (or ``fp8_e5m2``); everything else is ``auto``."""
    return "fp8_e4m3" if element_dtype.startswith("fp8") else "auto"


def vllm_args(model: str, res: ResolvedDeployment, *, role: Role = "both") -> list[str]:
    """``vllm serve MODEL ...`` as an argument list, every knob the plan chose made explicit."""
    args = [
        "vllm",
        "serve",
        model,
        "--tensor-parallel-size",
        str(res.tensor_parallel_size),
        "--pipeline-parallel-size",
        str(res.pipeline_parallel_size),
        "--data-parallel-size",
        str(res.data_parallel_size),
    ]
    if res.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    if res.max_num_seqs is not None:
        args += ["--max-num-seqs", str(res.max_num_seqs)]
    args += [
        "--max-num-batched-tokens",
        str(res.max_num_batched_tokens),
        "--gpu-memory-utilization",
        f"{res.memory_fraction:g}",
        "--kv-cache-dtype",
        res.kv_cache.name if res.kv_cache.element_dtype.startswith("fp8") else "auto",
        "--max-model-len",
        str(res.max_model_len),
    ]
    if role != "both":
        args += ["--kv-transfer-config", json.dumps(_VLLM_KV_TRANSFER, separators=(",", ":"))]
    return args


def sglang_args(model: str, res: ResolvedDeployment, *, role: Role = "both") -> list[str]:
    """``python -m sglang.launch_server --model-path MODEL ...`` as an argument list."""
    args = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--tp",
        str(res.tensor_parallel_size),
        "--pp-size",
        str(res.pipeline_parallel_size),
        "--dp",
        str(res.data_parallel_size),
    ]
    if res.enable_expert_parallel:
        args += ["--ep-size", str(res.expert_parallel_size)]
    args += [
        "--mem-fraction-static",
        f"{res.memory_fraction:g}",
        "--chunked-prefill-size",
        str(res.max_num_batched_tokens),
        "--kv-cache-dtype",
        _sglang_kv_dtype(res.kv_cache.element_dtype),
        "--context-length",
        str(res.max_model_len),
    ]
    if res.max_num_seqs is not None:
        args += ["--max-running-requests", str(res.max_num_seqs)]
    if role != "both":
        args += ["--disaggregation-mode", role]
    return args
