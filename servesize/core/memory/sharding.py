"""How vLLM splits a model over tensor, pipeline and expert parallel ranks.

- Pipeline stages: ``get_pp_indices`` in vllm-project/vllm:vllm/distributed/utils.py gives
  every stage ``L // PP`` layers and hands the remainder, one each, to the stages just before
  the last one.
- KV heads: ``QKVParallelLinear`` in vllm/model_executor/layers/linear.py keeps
  ``H_kv / TP`` heads per rank, or one head replicated ``TP / H_kv`` times when
  ``TP >= H_kv``; ``ModelConfig.get_num_kv_heads`` (vllm/config/model.py) sizes the cache with
  ``max(1, H_kv // TP)``.
- Vocabulary: ``pad_vocab_size`` in vllm/model_executor/layers/vocab_parallel_embedding.py
  pads to a multiple of 64 (``DEFAULT_VOCAB_PADDING_SIZE``) before splitting it over TP.
- Experts: ``determine_expert_map`` (vllm/model_executor/layers/fused_moe/layer.py) gives
  rank ``r`` ``E // EP + (1 if r < E % EP else 0)`` experts (linear placement); with expert
  parallelism off, the MoE layer is tensor-parallel over ``TP * DP`` ranks.
"""

from __future__ import annotations

from servesize.core.memory.units import cdiv, round_up

__all__ = [
    "VOCAB_PADDING",
    "kv_heads_per_rank",
    "local_experts",
    "padded_vocab_per_rank",
    "pp_layer_ranges",
]

VOCAB_PADDING = 64


def pp_layer_ranges(num_layers: int, pp_size: int) -> tuple[range, ...]:
    """Layer index range of each pipeline stage, as ``get_pp_indices`` splits them.

    >>> [len(r) for r in pp_layer_ranges(61, 4)]
    [15, 15, 16, 15]
    """
    per_stage = [num_layers // pp_size] * pp_size
    remaining = num_layers % pp_size
    for i in range(2, remaining + 2):
        per_stage[-i] += 1
    ranges = []
    start = 0
    for count in per_stage:
        ranges.append(range(start, start + count))
        start += count
    return tuple(ranges)


def kv_heads_per_rank(num_kv_heads: int, tp_size: int) -> int:
    """KV heads one rank stores: ``max(1, H_kv // TP)`` (replicated when ``H_kv < TP``).

    >>> kv_heads_per_rank(8, 2), kv_heads_per_rank(8, 16)
    (4, 1)
    """
    return max(1, num_kv_heads // tp_size)


def padded_vocab_per_rank(vocab_size: int, tp_size: int) -> int:
    """Rows of the vocab-parallel embedding on one rank: ``ceil(pad64(V) / TP)``.

    >>> padded_vocab_per_rank(128256, 1), padded_vocab_per_rank(32000, 8)
    (128256, 4000)
    """
    return cdiv(round_up(vocab_size, VOCAB_PADDING), tp_size)


def local_experts(num_experts: int, ep_size: int) -> int:
    """Experts on the most loaded expert-parallel rank: ``ceil(E / EP)``.

    >>> local_experts(256, 8), local_experts(10, 4)
    (32, 3)
    """
    return cdiv(num_experts, ep_size)
