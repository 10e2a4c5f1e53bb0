"""Whole-prompt scheduling, TensorRT-LLM's default (``policy="no_chunking"``).

vLLM v1 with chunked prefill disabled (TensorRT-LLM's PyTorch flow has
``enable_chunked_prefill = False``): a waiting request is admitted only if all its tokens (a
resumed request recomputes prompt and generated ones) fit in the budget left, and a request
whose whole sequence can never fit in one step's budget is rejected on arrival.

TensorRT-LLM's capacity scheduler decides admission and eviction (``SchedulerConfig.
capacity_policy``; NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp``,
read at commit 02a10fed, the 1.0/1.1 line the calibration rows ran): ``guaranteed_no_evict``
(``GuaranteedNoEvictScheduler::impl``, the default) schedules every request in progress, then
admits pending ones in order while ``NoEvictScheduledBlocksManager.enoughAvailableBlocks`` — the
free blocks less every scheduled request's remaining blocks to completion cover the request's
whole prompt + output — and stops at the first that does not fit; nothing is ever evicted.
``max_utilization`` (``MaxUtilizationScheduler``) schedules in order on the blocks of the next
step and, when one does not fit, pauses the last started request (its KV freed; ``LlmRequest::
pause`` folds its generated tokens into the prompt, recomputed when it is resumed from its place
in the queue) and, since everything after it is dropped from this pass, admits nothing new: the
same steps as ``incremental`` here (block reuse, which could spare part of the recompute, is not
modelled).
"""

from __future__ import annotations

from servesize.core.simulation.policies.vllm_v1 import VllmV1


class WholePrompt(VllmV1):
    """:class:`VllmV1` without chunked prefill."""

    chunks_prompts = False
