"""KV-cache element formats (``--kv-cache-dtype``) and their bytes per token and layer.

From vllm-project/vllm:vllm/v1/kv_cache_interface.py (``AttentionSpec.real_page_size_bytes``,
``MLAAttentionSpec``) and vllm/config/cache.py (``CacheDType``):

- ``auto``: the model dtype; ``bfloat16``/``float16``: that dtype;
  ``fp8``/``fp8_e4m3``/``fp8_inc``/``fp8_e5m2``: one byte per element. Their per-tensor
  K/V/Q/P scales are four fp32 layer attributes (16 B per layer) outside the pages.
- ``int8_per_token_head``/``fp8_per_token_head``: one byte per element plus an fp32 scale per
  (token, KV head) for K and for V, carved out of the page: ``+ 2·H_kv·4`` B.
- ``nvfp4``: E2M1 pairs plus one fp8 scale per 16 values: ``D/2 + D/16`` B per head for K and V.
- ``fp8_ds_mla`` (MLA only): 656 B per token (512 fp8 latent values, 4 fp32 tile scales, 64
  bf16 rotary values).

>>> resolve_kv_format("auto", "bf16").mha_bytes(kv_heads=8, head_dim=128)
4096
>>> resolve_kv_format("fp8", "bf16").mla_bytes(kv_lora_rank=512, rope_dim=64)
576
"""

from __future__ import annotations

from dataclasses import dataclass

from servesize.core.dtypes import bytes_for

__all__ = ["KV_CACHE_DTYPES", "KvCacheFormat", "resolve_kv_format"]

_PLAIN = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_inc": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
_SPECIAL = {
    "int8_per_token_head": ("int8", "per_token_head"),
    "fp8_per_token_head": ("fp8_e4m3", "per_token_head"),
    "nvfp4": ("fp4", "nvfp4"),
    "fp8_ds_mla": ("fp8_e4m3", "ds_mla"),
}
KV_CACHE_DTYPES: tuple[str, ...] = ("auto", *_PLAIN, *_SPECIAL)
"""Accepted ``kv_cache_dtype`` values (vLLM spellings plus bf16/fp16/fp32 aliases)."""

DS_MLA_BYTES_PER_TOKEN = 656


@dataclass(frozen=True, slots=True, kw_only=True)
class KvCacheFormat:
    """How one cached K/V element (or MLA latent) is stored."""

    name: str
    """The resolved name shown to users (``bf16``, ``fp8_e4m3``, ``fp8_ds_mla``, ...)."""
    element_dtype: str
    layout: str = "plain"
    """``plain``, ``per_token_head``, ``nvfp4`` or ``ds_mla``."""

    @property
    def is_fp8(self) -> bool:
        return self.element_dtype.startswith("fp8")

    def element_text(self) -> str:
        """Bytes per element as printed in formulas."""
        size = bytes_for(8, self.element_dtype) / 8
        return f"{size:g} B"

    def mha_bytes(self, *, kv_heads: int, head_dim: int) -> int:
        """K and V bytes of one token in one layer holding ``kv_heads`` heads."""
        if self.layout == "nvfp4":
            return 2 * kv_heads * (head_dim // 2 + head_dim // 16)
        base = bytes_for(2 * kv_heads * head_dim, self.element_dtype)
        if self.layout == "per_token_head":
            base += 2 * kv_heads * 4
        return base

    def mha_formula(self, *, kv_heads: int, head_dim: int) -> str:
        if self.layout == "nvfp4":
            return f"2 · {kv_heads} KV heads · ({head_dim}/2 + {head_dim}/16) B"
        text = f"2 · {kv_heads} KV heads · {head_dim} · {self.element_text()}"
        if self.layout == "per_token_head":
            text += f" + 2 · {kv_heads} · 4 B scales"
        return text

    def mla_bytes(self, *, kv_lora_rank: int, rope_dim: int) -> int:
        """Latent plus rotary-key bytes of one token in one MLA layer."""
        if self.layout == "ds_mla":
            return DS_MLA_BYTES_PER_TOKEN
        return bytes_for(kv_lora_rank + rope_dim, self.element_dtype)

    def mla_formula(self, *, kv_lora_rank: int, rope_dim: int) -> str:
        if self.layout == "ds_mla":
            return f"{DS_MLA_BYTES_PER_TOKEN} B (fp8_ds_mla: 512 fp8 + 4·4 B scales + 64·2 B rope)"
        return f"({kv_lora_rank} + {rope_dim}) · {self.element_text()}"


def resolve_kv_format(kv_cache_dtype: str, model_dtype: str) -> KvCacheFormat | None:
    """The format ``kv_cache_dtype`` selects (``auto`` = model dtype); None if unknown."""
    key = kv_cache_dtype.strip().lower()
    if key == "auto":
        return KvCacheFormat(name=model_dtype, element_dtype=model_dtype)
    if key in _PLAIN:
        return KvCacheFormat(name=_PLAIN[key], element_dtype=_PLAIN[key])
    if key in _SPECIAL:
        element, layout = _SPECIAL[key]
        return KvCacheFormat(name=key, element_dtype=element, layout=layout)
    return None
