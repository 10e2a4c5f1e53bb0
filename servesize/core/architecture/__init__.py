"""Model architectures from Hugging Face ``config.json``: structure, parameters, cache, FLOPs.

>>> from servesize.core.architecture import parse_architecture, summarize
>>> s = summarize(parse_architecture(
...     {"model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 28, "head_dim": 128,
...      "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 3072,
...      "vocab_size": 151936, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
...     name="Qwen/Qwen3-0.6B"))
>>> s.parameters_total, s.kv_bytes_per_token["bf16"]
(596049920, 114688)
"""

from servesize.core.architecture.cache import (
    KvFootprint,
    kv_bytes_per_sequence,
    kv_elements_per_token,
    kv_footprint,
    state_bytes_per_sequence,
    state_elements_per_sequence,
)
from servesize.core.architecture.flops import AttentionFlopsTerm, FlopsProfile, flops_profile
from servesize.core.architecture.model import (
    STATE_KINDS,
    Architecture,
    AttentionKind,
    DecoderLayer,
    DenseMlp,
    GatedDeltaNet,
    LatentAttention,
    MambaMixer,
    Mixer,
    Mlp,
    MlpKind,
    MoeMlp,
    MultiHeadAttention,
)
from servesize.core.architecture.params import (
    MlpParameters,
    ParameterCounts,
    count_parameters,
    mixer_parameters,
    mlp_parameters,
)
from servesize.core.architecture.parse import parse_architecture
from servesize.core.architecture.quantization import QuantizationSpec
from servesize.core.architecture.summary import (
    DEFAULT_KV_DTYPES,
    DEFAULT_STATE_DTYPES,
    ArchitectureSummary,
    summarize,
)

__all__ = [
    "DEFAULT_KV_DTYPES",
    "DEFAULT_STATE_DTYPES",
    "STATE_KINDS",
    "Architecture",
    "ArchitectureSummary",
    "AttentionFlopsTerm",
    "AttentionKind",
    "DecoderLayer",
    "DenseMlp",
    "FlopsProfile",
    "GatedDeltaNet",
    "KvFootprint",
    "LatentAttention",
    "MambaMixer",
    "Mixer",
    "Mlp",
    "MlpKind",
    "MlpParameters",
    "MoeMlp",
    "MultiHeadAttention",
    "ParameterCounts",
    "QuantizationSpec",
    "count_parameters",
    "flops_profile",
    "kv_bytes_per_sequence",
    "kv_elements_per_token",
    "kv_footprint",
    "mixer_parameters",
    "mlp_parameters",
    "parse_architecture",
    "state_bytes_per_sequence",
    "state_elements_per_sequence",
    "summarize",
]
