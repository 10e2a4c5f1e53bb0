"""FLOPs per token as a function of how many tokens it attends to.

A token that attends to ``c`` tokens (its own position included) costs

``F(c) = 2 * P_mm + sum over attention layers of a_l * min(c, w_l) + sum over linear layers of r_l``

- ``P_mm``: matrix-multiply parameters the token uses — the active parameters without the
  input embedding (a table lookup) and without norm weights, plus the output head even when it
  is tied to the embedding (the unembedding matmul runs either way). Biases are counted as
  matmul parameters (an overcount below 0.01 %).
- ``a_l``: attention score and value FLOPs per attended token, ``2*H*D_qk + 2*H*D_v`` (``QK^T``
  and ``AV``); for MLA ``D_qk = qk_nope + qk_rope`` and ``D_v = v_head_dim`` (the
  non-absorbed form; absorbed decode kernels trade these for latent-space products).
- ``w_l``: the window of sliding/chunked layers, infinite for full attention and MLA.
- ``r_l``: gated delta-net recurrence, ``6 * H_v * d_k * d_v`` per token (state decay folded in;
  read ``k^T S``, rank-1 update, read ``q^T S``), independent of ``c``. The depthwise causal
  conv is already in ``P_mm``. Mamba layers (selective scan, Mamba-1 and Mamba-2 alike):
  ``6 * D_i * N`` per token (decay and ``dt*B*x`` update of the ``D_i x N`` state, ``C``
  read-out); the chunked SSD prefill kernel is priced the same. Mamba-1's ``A_log`` and the
  per-head vectors count as matmul parameters (an overcount below 0.5 % of the layer).

Prefill of ``n`` new tokens after ``p`` cached ones sums ``F(c)`` over ``c = p+1 .. p+n``,
which is computed in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

from servesize.core.architecture.model import (
    Architecture,
    AttentionKind,
    GatedDeltaNet,
    LatentAttention,
    MambaMixer,
    Mixer,
    MultiHeadAttention,
)
from servesize.core.architecture.params import count_parameters

__all__ = ["AttentionFlopsTerm", "FlopsProfile", "flops_profile"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionFlopsTerm:
    """``layers`` attention layers costing ``flops_per_attended_token`` each per attended token."""

    kind: str
    layers: int
    flops_per_attended_token: int
    """Per layer: ``2*H*(D_qk + D_v)``."""
    window_tokens: int | None
    """Cap on attended tokens (sliding/chunked), None for unbounded attention."""


def _sum_min(n: int, window: int | None) -> int:
    """``sum(min(c, window) for c in 1..n)`` in closed form."""
    if window is None or n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopsProfile:
    """The coefficients of ``F(c)``; methods evaluate it for decode and prefill."""

    matmul_flops_per_token: int
    """``2 * P_mm``."""
    recurrent_flops_per_token: int
    """Linear-attention recurrence, summed over layers."""
    attention_terms: tuple[AttentionFlopsTerm, ...]

    def decode_flops_per_token(self, context_tokens: int) -> int:
        """FLOPs of one token that attends to ``context_tokens`` tokens (itself included)."""
        if context_tokens < 1:
            raise ValueError(f"context_tokens must be >= 1, got {context_tokens}")
        attention = sum(
            t.layers
            * t.flops_per_attended_token
            * (context_tokens if t.window_tokens is None else min(context_tokens, t.window_tokens))
            for t in self.attention_terms
        )
        return self.matmul_flops_per_token + self.recurrent_flops_per_token + attention

    def prefill_flops(self, prompt_tokens: int, cached_tokens: int = 0) -> int:
        """Total FLOPs to process ``prompt_tokens`` new tokens after ``cached_tokens`` ones."""
        if prompt_tokens < 0 or cached_tokens < 0:
            raise ValueError("prompt_tokens and cached_tokens must be >= 0")
        end = cached_tokens + prompt_tokens
        attention = sum(
            t.layers
            * t.flops_per_attended_token
            * (_sum_min(end, t.window_tokens) - _sum_min(cached_tokens, t.window_tokens))
            for t in self.attention_terms
        )
        per_token = self.matmul_flops_per_token + self.recurrent_flops_per_token
        return prompt_tokens * per_token + attention


def _attention_flops(mixer: Mixer) -> int:
    if isinstance(mixer, MultiHeadAttention):
        return 4 * mixer.num_heads * mixer.head_dim
    if isinstance(mixer, LatentAttention):
        qk = mixer.qk_nope_head_dim + mixer.qk_rope_head_dim
        return 2 * mixer.num_heads * (qk + mixer.v_head_dim)
    return 0


def _recurrent_flops(mixer: Mixer) -> int:
    if isinstance(mixer, GatedDeltaNet):
        return 6 * mixer.num_value_heads * mixer.key_head_dim * mixer.value_head_dim
    if isinstance(mixer, MambaMixer):
        return 6 * mixer.d_inner * mixer.d_state
    return 0


def flops_profile(arch: Architecture) -> FlopsProfile:
    """The per-token FLOPs model of ``arch`` (see the module docstring for the formula).

    >>> from servesize.core.architecture.parse import parse_architecture
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "head_dim": 2,
    ...      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 16,
    ...      "vocab_size": 10, "tie_word_embeddings": True}, name="toy")
    >>> p = flops_profile(arch)  # 2 * (192 attention + 384 mlp + 80 tied head); 4*4*2 per token
    >>> p.matmul_flops_per_token, p.decode_flops_per_token(10)
    (1312, 1632)
    """
    counts = count_parameters(arch)
    head = arch.vocab_size * arch.hidden_size
    matmul = counts.active_excluding_embedding - counts.norms - counts.lm_head + head
    terms: dict[tuple[str, int, int | None], int] = {}
    recurrent = 0
    for layer in arch.layers:
        mixer = layer.mixer
        recurrent += _recurrent_flops(mixer)
        per_token = _attention_flops(mixer)
        if not per_token:
            continue
        window = (
            mixer.window_tokens
            if isinstance(mixer, MultiHeadAttention) and mixer.kind is not AttentionKind.FULL
            else None
        )
        key = (mixer.kind.value, per_token, window)
        terms[key] = terms.get(key, 0) + 1
    return FlopsProfile(
        matmul_flops_per_token=2 * matmul,
        recurrent_flops_per_token=recurrent,
        attention_terms=tuple(
            AttentionFlopsTerm(kind=k, layers=n, flops_per_attended_token=f, window_tokens=w)
            for (k, f, w), n in terms.items()
        ),
    )
