"""The KV-cache calculator: two of {concurrency, tokens per sequence, memory} give the third.

For raw geometry (``L`` layers, ``H_kv`` KV heads, head dim ``D``, ``s`` bytes per element),
``kv_bytes = 2 · B · T · L · H_kv · D · s``; so ``max_concurrency = floor(M / (2·T·L·H_kv·D·s))``
and ``max_tokens = floor(M / (2·B·L·H_kv·D·s))``. With a model instead, bytes per sequence are
summed layer by layer on one GPU of ``tensor_parallel_size`` (KV heads ``max(1, H_kv // TP)``,
MLA latents unsplit, sliding windows capping their layers, linear-attention state added once
per sequence), and the largest ``T`` is found by bisection. ``block_size`` rounds each
sequence up to whole blocks (``cdiv(T, bs) · bs``).

>>> r = kv_budget(num_layers=32, num_kv_heads=8, head_dim=128, bytes_per_element=2,
...               concurrency=4, tokens_per_sequence=4096)
>>> r.kv_bytes == 2 * 2**30  # the seed's 2 GiB
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from servesize.core.architecture import Architecture
from servesize.core.errors import FieldIssue
from servesize.core.memory.errors import InvalidDeploymentError
from servesize.core.memory.kv import KvLayerSpec, kv_layer_specs
from servesize.core.memory.kv_format import resolve_kv_format
from servesize.core.memory.units import cdiv, gib_text

__all__ = ["KvBudgetResult", "kv_budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KvBudgetResult:
    """The calculator's answer; the field that was asked for is set, the others echo inputs."""

    kv_bytes: int | None
    max_concurrency: int | None
    max_tokens_per_sequence: int | None
    bytes_per_token: int
    """Per GPU, all cache layers, below every window."""
    formula: str


def _window_bytes(specs: tuple[KvLayerSpec, ...], tokens: int) -> int:
    total = 0
    for spec in specs:
        held = tokens if spec.window_tokens is None else min(tokens, spec.window_tokens)
        total += spec.layers * (spec.bytes_per_token * held + spec.state_bytes)
    return total


def kv_budget(
    *,
    num_layers: int | None = None,
    num_kv_heads: int | None = None,
    head_dim: int | None = None,
    bytes_per_element: float | None = None,
    model: Architecture | None = None,
    kv_cache_dtype: str = "auto",
    tensor_parallel_size: int = 1,
    concurrency: int | None = None,
    tokens_per_sequence: int | None = None,
    memory_bytes: int | None = None,
    block_size: int | None = None,
) -> KvBudgetResult:
    """Solve ``kv_bytes = B · bytes_per_sequence(T)`` for the one quantity not given.

    Raises
    ------
    InvalidDeploymentError
        Unless exactly two of ``concurrency``, ``tokens_per_sequence`` and ``memory_bytes``
        are given, with either a model or the four geometry fields (pointers name them).
    """
    issues: list[FieldIssue] = []
    given = {
        "concurrency": concurrency,
        "tokens_per_sequence": tokens_per_sequence,
        "memory_bytes": memory_bytes,
    }
    present = [k for k, v in given.items() if v is not None]
    if len(present) != 2:
        for key in given:
            issues.append(
                FieldIssue(
                    field=f"/{key}",
                    problem=f"give exactly two of concurrency, tokens_per_sequence and "
                    f"memory_bytes ({len(present)} given)",
                )
            )
    for key, value in given.items():
        if value is not None and value < 1:
            issues.append(FieldIssue(field=f"/{key}", problem=f"must be >= 1, got {value}"))
    for key, value in (("tensor_parallel_size", tensor_parallel_size), ("block_size", block_size)):
        if value is not None and value < 1:
            issues.append(FieldIssue(field=f"/{key}", problem=f"must be >= 1, got {value}"))
    geometry: dict[str, float | None] = {
        "num_layers": num_layers,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "bytes_per_element": bytes_per_element,
    }
    specs: tuple[KvLayerSpec, ...] = ()
    if model is None:
        for name, amount in geometry.items():
            if amount is None:
                issues.append(FieldIssue(field=f"/{name}", problem="required without a model"))
            elif amount <= 0:
                issues.append(FieldIssue(field=f"/{name}", problem=f"must be > 0, got {amount}"))
    else:
        kv = resolve_kv_format(kv_cache_dtype, model.weight_dtype)
        if kv is None:
            issues.append(
                FieldIssue(field="/kv_cache_dtype", problem=f"unknown dtype {kv_cache_dtype!r}")
            )
        else:
            specs = kv_layer_specs(
                model, range(len(model.layers)), tensor_parallel_size, kv, model.weight_dtype
            )
    if issues:
        raise InvalidDeploymentError(issues)

    def rounded(tokens: int) -> int:
        return cdiv(tokens, block_size) * block_size if block_size else tokens

    if model is None:
        assert num_layers is not None
        assert num_kv_heads is not None
        assert head_dim is not None
        assert bytes_per_element is not None
        heads = max(1, num_kv_heads // tensor_parallel_size)
        per_token_exact = 2 * num_layers * heads * head_dim * Fraction(str(bytes_per_element))
        per_token = math.ceil(per_token_exact)
        geometry_text = (
            f"{num_layers} layers · {heads} KV heads · {head_dim} · {bytes_per_element:g} B"
        )

        def seq_bytes(tokens: int) -> int:
            return math.ceil(per_token_exact * rounded(tokens))
    else:
        per_token = sum(s.bytes_per_token * s.layers for s in specs)
        geometry_text = " + ".join(f"{s.layers} {s.kind} layers" for s in specs) + (
            f" of {model.name} ({per_token:,} B/token below every window)"
        )

        def seq_bytes(tokens: int) -> int:
            return _window_bytes(specs, rounded(tokens))

    if memory_bytes is None:
        assert concurrency is not None
        assert tokens_per_sequence is not None
        t = rounded(tokens_per_sequence)
        kv_bytes = concurrency * seq_bytes(tokens_per_sequence)
        formula = (
            f"2 · {concurrency} seqs · {t} tokens · {geometry_text} = {kv_bytes:,} B "
            f"({gib_text(kv_bytes)})"
            if model is None
            else f"{concurrency} seqs · bytes({t} tokens; {geometry_text}) = {kv_bytes:,} B "
            f"({gib_text(kv_bytes)})"
        )
        return KvBudgetResult(
            kv_bytes=kv_bytes,
            max_concurrency=concurrency,
            max_tokens_per_sequence=tokens_per_sequence,
            bytes_per_token=per_token,
            formula=formula,
        )
    if tokens_per_sequence is not None:
        per_seq = seq_bytes(tokens_per_sequence)
        count = memory_bytes // per_seq if per_seq else 0
        t = rounded(tokens_per_sequence)
        denominator = (
            f"2 · {t} tokens · {geometry_text}"
            if model is None
            else f"bytes({t} tokens; {geometry_text})"
        )
        return KvBudgetResult(
            kv_bytes=count * per_seq,
            max_concurrency=count,
            max_tokens_per_sequence=tokens_per_sequence,
            bytes_per_token=per_token,
            formula=(
                f"floor({memory_bytes:,} B / ({denominator} = {per_seq:,} B)) = {count} sequences"
            ),
        )
    assert concurrency is not None
    if model is None:
        tokens = int(Fraction(memory_bytes) / (concurrency * per_token_exact))
        if block_size:
            tokens = tokens // block_size * block_size
        formula = (
            f"floor({memory_bytes:,} B / (2 · {concurrency} seqs · {geometry_text})) "
            f"= {tokens} tokens"
        )
    else:
        budget = memory_bytes // concurrency
        lo, hi = 0, 1
        while seq_bytes(hi) <= budget and hi < 2**40:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if seq_bytes(mid) <= budget:
                lo = mid
            else:
                hi = mid
        tokens = lo // block_size * block_size if block_size else lo
        formula = (
            f"largest T with {concurrency} seqs · bytes(T; {geometry_text}) <= "
            f"{memory_bytes:,} B: T = {tokens} tokens"
        )
    return KvBudgetResult(
        kv_bytes=concurrency * seq_bytes(tokens) if tokens else 0,
        max_concurrency=concurrency,
        max_tokens_per_sequence=tokens,
        bytes_per_token=per_token,
        formula=formula,
    )
