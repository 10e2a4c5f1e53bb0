"""Shared inputs of the sizing tests: Llama-3.1-8B's config and datasheet GPUs."""

from __future__ import annotations

from servesize.core.architecture import parse_architecture
from servesize.core.hardware import HardwareSpec, datasheet_spec
from servesize.db.seed import datasheet_entries

LLAMA_8B = parse_architecture(
    {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "head_dim": 128,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    },
    name="llama-3.1-8b",
)
LLAMA_70B = parse_architecture(
    {
        "model_type": "llama",
        "hidden_size": 8192,
        "num_hidden_layers": 80,
        "head_dim": 128,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "intermediate_size": 28672,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    },
    name="llama-3.1-70b",
)
GPUS: dict[str, HardwareSpec] = {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}
H100 = GPUS["h100-sxm"]
