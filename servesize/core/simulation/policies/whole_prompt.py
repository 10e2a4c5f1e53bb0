"""Whole-prompt scheduling, TensorRT-LLM's default (``policy="no_chunking"``).

vLLM v1 with chunked prefill disabled (TensorRT-LLM's PyTorch flow has
``enable_chunked_prefill = False``): a waiting request is admitted only if all its tokens (a
resumed request recomputes prompt and generated ones) fit in the budget left, and a request
whose whole sequence can never fit in one step's budget is rejected on arrival.
"""

from __future__ import annotations

from servesize.core.simulation.policies.vllm_v1 import VllmV1


class WholePrompt(VllmV1):
    """:class:`VllmV1` without chunked prefill."""

    chunks_prompts = False
