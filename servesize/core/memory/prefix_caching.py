"""Whether an engine reuses cached prefix blocks when the deployment does not say.

- vLLM: the V1 engine (from v0.8.0, :data:`~.engine_defaults.VLLM_V1_VERSION`) turns automatic
  prefix caching on by default (``EngineArgs.enable_prefix_caching``; vLLM's own
  ``tests/v1/engine/test_engine_args.py: test_prefix_caching_from_cli`` asserts "V1 turns on
  prefix caching by default"); V0 releases leave it off (``CacheConfig.enable_prefix_caching =
  False``).
- SGLang: the radix cache is on unless ``--disable-radix-cache``
  (``python/sglang/srt/server_args.py: ServerArgs.disable_radix_cache = False``).
- TensorRT-LLM: ``KvCacheConfig.enable_block_reuse`` defaults to True
  (``tensorrt_llm/llmapi/llm_args.py``; ``docs/source/features/kvcache.md``: blocks are stored
  in a radix search tree as they fill and reused by later requests).
"""

from __future__ import annotations

from servesize.core.memory.engine_defaults import VLLM_V1_VERSION

__all__ = ["prefix_caching_default"]


def prefix_caching_default(engine: str, version: tuple[int, int, int]) -> tuple[bool, str]:
    """The engine's default for ``enable_prefix_caching`` and where it comes from.

    >>> prefix_caching_default("vllm", (0, 11, 0))
    (True, 'vLLM V1 default (EngineArgs.enable_prefix_caching)')
    >>> prefix_caching_default("vllm", (0, 7, 3))[0]
    False
    """
    if engine == "vllm":
        if version[:2] >= VLLM_V1_VERSION:
            return True, "vLLM V1 default (EngineArgs.enable_prefix_caching)"
        return False, "vLLM V0 default (CacheConfig.enable_prefix_caching)"
    if engine == "sglang":
        return True, "SGLang default (disable_radix_cache = False)"
    return True, "TensorRT-LLM default (KvCacheConfig.enable_block_reuse = True)"
