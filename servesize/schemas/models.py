"""Model-architecture schemas: the catalogue, inspection and registration."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from servesize.schemas.base import RequestModel, ResponseModel

MODEL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
LLAMA_3_1_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


class InlineModel(RequestModel):
    """A model given by its Hugging Face ``config.json`` instead of an id."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    hf_config: dict[str, Any] = Field(examples=[LLAMA_3_1_8B_CONFIG])
    """The model's Hugging Face ``config.json`` as an object (architecture, sizes,
    ``quantization_config``); nothing is downloaded."""
    name: str | None = Field(default=None, max_length=200, examples=["my-llama-8b"])
    """A label used in messages; default ``inline``."""


ModelRef = str | InlineModel
"""``"meta-llama/Llama-3.1-8B"`` (catalogue or custom id) or ``{"hf_config": {...}}``."""


class InspectRequest(RequestModel):
    hf_config: dict[str, Any] = Field(examples=[LLAMA_3_1_8B_CONFIG])
    name: str | None = Field(default=None, max_length=200)


class ModelRegister(RequestModel):
    id: str = Field(pattern=MODEL_ID_PATTERN, max_length=200, examples=["acme/llama-8b-ft"])
    hf_config: dict[str, Any] = Field(examples=[LLAMA_3_1_8B_CONFIG])


class QuantizationOut(ResponseModel):
    method: str
    weight_dtype: str | None
    weight_bits: int | None
    granularity: str | None
    group_size: int | None
    block_shape: tuple[int, int] | None
    symmetric: bool | None
    activation_dtype: str | None
    activation_scheme: str | None
    unquantized_modules: list[str]
    kv_cache_dtype: str | None
    format: str | None


class ModelSummaryOut(ResponseModel):
    """Derived facts. Parameter counts are exact integers, before any parallelism."""

    name: str
    model_type: str
    family: str
    architecture: str | None
    multimodal: bool
    num_layers: int
    layer_kinds: dict[str, int]
    mlp_kinds: dict[str, int]
    attention_variants: dict[str, int]
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    num_experts: int
    experts_per_token: int
    parameters_total: int
    parameters_active: int
    parameters_active_excluding_embedding: int
    parameters_embedding: int
    parameters_lm_head: int
    parameters_by_component: dict[str, int]
    parameters_mtp: int
    mtp_layers: int
    kv_bytes_per_token: dict[str, int]
    kv_bytes_per_token_unbounded: dict[str, int]
    kv_bytes_per_token_by_kind: dict[str, dict[str, int]]
    window_tokens: dict[str, int]
    state_bytes_per_sequence: dict[str, int]
    weight_dtype: str
    quantization: QuantizationOut | None
    max_position_embeddings: int | None
    assumptions: list[str]


class ModelListItem(ResponseModel):
    id: str
    source: Literal["catalogue", "custom"]
    family: str
    model_type: str
    tags: list[str]
    parameters_total: int
    parameters_active: int
    num_layers: int


class ModelOut(ResponseModel):
    id: str
    source: Literal["catalogue", "custom"]
    tags: list[str]
    config: dict[str, Any]
    summary: ModelSummaryOut
