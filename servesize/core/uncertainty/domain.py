"""The validated domain: where the calibration rows say the prediction intervals hold.

The domain is what the held-out serving rows span: the GPUs they ran on, per engine the
versions, model families and ranges of input length, output length and client count. A request
outside it still gets its prediction and interval, with a warning per way it lies outside
(docs/modeling.md §5.7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servesize.core.architecture import Architecture, AttentionKind, MlpKind
from servesize.core.hardware import profile_id_for

__all__ = ["FAMILIES", "EngineDomain", "ValidatedDomain", "domain_warnings", "model_family"]

FAMILIES: tuple[str, ...] = ("dense", "moe", "mla", "hybrid")
"""Model families of the residual groups: dense attention and MLP; mixture of experts; latent
attention (DeepSeek-V2/V3); hybrid token mixers (sliding, chunked or linear attention layers,
e.g. gpt-oss, Gemma, Qwen3-Next, Jamba, Mamba)."""

_HYBRID_KINDS = {
    AttentionKind.SLIDING,
    AttentionKind.CHUNKED,
    AttentionKind.LINEAR,
    AttentionKind.MAMBA,
}


def model_family(arch: Architecture) -> str:
    """The family of ``arch``, the first that applies: ``mla`` if any layer uses latent
    attention, ``hybrid`` if any uses sliding, chunked or linear attention, ``moe`` if any MLP
    is a mixture of experts, else ``dense``."""
    kinds = {layer.mixer.kind for layer in arch.layers}
    if AttentionKind.MLA in kinds:
        return "mla"
    if kinds & _HYBRID_KINDS:
        return "hybrid"
    if any(layer.mlp.kind == MlpKind.MOE for layer in arch.layers):
        return "moe"
    return "dense"


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineDomain:
    """What the rows of one engine cover; ranges are ``(min, max)`` inclusive."""

    versions: tuple[str, ...]
    families: tuple[str, ...]
    input_tokens: tuple[int, int]
    output_tokens: tuple[int, int]
    concurrency: tuple[int, int]
    models: tuple[str, ...] = ()
    """Catalogue models with held-out rows of this engine (empty: not checked)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidatedDomain:
    gpus: tuple[str, ...]
    """GPU names as the hardware database spells them (``"H100 SXM"``)."""
    engines: Mapping[str, EngineDomain]
    new_model_coverage: Mapping[float, Mapping[str, float]] = field(default_factory=dict)
    """``{coverage: {metric: fraction}}`` the bands reached on models left out of them."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ValidatedDomain:
        """Parse the ``domain`` object of ``prediction_intervals.json``."""
        return cls(
            gpus=tuple(data["gpus"]),
            engines={
                name: EngineDomain(
                    versions=tuple(e["versions"]),
                    families=tuple(e["families"]),
                    input_tokens=(int(e["input_tokens"][0]), int(e["input_tokens"][1])),
                    output_tokens=(int(e["output_tokens"][0]), int(e["output_tokens"][1])),
                    concurrency=(int(e["concurrency"][0]), int(e["concurrency"][1])),
                    models=tuple(e.get("models", ())),
                )
                for name, e in data["engines"].items()
            },
            new_model_coverage={
                float(c): {m: float(f) for m, f in by_metric.items()}
                for c, by_metric in data.get("new_model_coverage", {}).items()
            },
        )


def _outside(name: str, values: Sequence[int], span: tuple[int, int]) -> str | None:
    low, high = span
    out = [v for v in values if not low <= v <= high]
    if not out:
        return None
    return f"{name} {max(out) if max(out) > high else min(out)} outside the calibrated {low}-{high}"


def _new_model(domain: ValidatedDomain, engine: str, model: str) -> str:
    text = f"{model} has no held-out {engine} rows: its band is borrowed from other models"
    reached = domain.new_model_coverage
    if reached:
        level = min(reached)
        cells = ", ".join(
            f"{m.removesuffix('_s').upper()} {f:.0%}" for m, f in reached[level].items()
        )
        text += (
            f"; on models left out of the residuals the {level:.0%} bands held only {cells}"
            " of the measurements"
        )
    else:
        text += "; how such bands cover a model never seen is not measured"
    return text


def domain_warnings(
    domain: ValidatedDomain,
    *,
    gpu: str,
    engine: str,
    engine_version: str | None,
    family: str,
    model: str | None = None,
    input_tokens: Sequence[int] = (),
    output_tokens: Sequence[int] = (),
    concurrency: Sequence[int] = (),
) -> tuple[str, ...]:
    """One warning per way the request lies outside ``domain`` (empty inside it).

    ``model`` (a catalogue id) is checked against the models with held-out rows.
    ``gpu`` is a name or id (``"H100 SXM"`` and ``"h100-sxm"`` match).
    ``input_tokens``/``output_tokens``/``concurrency`` are the values the request uses (an
    empty sequence skips the check, e.g. the client count of an open loop).
    """
    suffix = "; the prediction interval was not validated there"
    warnings: list[str] = []
    if profile_id_for(gpu) not in {profile_id_for(g) for g in domain.gpus}:
        warnings.append(
            f"no serving measurements on {gpu} (calibrated on {', '.join(domain.gpus)}){suffix}"
        )
    spec = domain.engines.get(engine)
    if spec is None:
        warnings.append(f"engine {engine} has no calibration rows{suffix}")
        return tuple(warnings)
    if engine_version is not None and engine_version not in spec.versions:
        warnings.append(
            f"{engine} {engine_version} was never calibrated (rows from "
            f"{', '.join(spec.versions)}){suffix}"
        )
    if family not in spec.families:
        warnings.append(
            f"no {engine} calibration rows for {family} models (rows for "
            f"{', '.join(spec.families)}){suffix}"
        )
    if model is not None and spec.models and model not in spec.models:
        warnings.append(_new_model(domain, engine, model))
    for name, unit, values, span in (
        ("input length", "tokens", input_tokens, spec.input_tokens),
        ("output length", "tokens", output_tokens, spec.output_tokens),
        ("concurrency", "clients", concurrency, spec.concurrency),
    ):
        found = _outside(name, values, span)
        if found is not None:
            warnings.append(f"{found} {unit} of the {engine} rows{suffix}")
    return tuple(warnings)
