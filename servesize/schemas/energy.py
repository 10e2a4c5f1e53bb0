"""Power and energy in answers (docs/modeling.md, "Energy and power")."""

from __future__ import annotations

from pydantic import ConfigDict

from servesize.core.energy import EnergyEstimate
from servesize.schemas.base import ResponseModel


class EnergyOut(ResponseModel):
    """Board power and energy of the GPUs serving the answer's load: per GPU
    ``P = P_idle + (P_busy − P_idle) · activity · busy_fraction``, energy per request
    ``power_w / request rate``, per output token ``power_w / output tokens/s``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    gpus: int
    """GPUs counted (a replica's TP × PP × DP; a plan's over all replicas)."""
    power_per_gpu_w: float
    """Mean board power of one GPU, watts."""
    power_w: float
    """All ``gpus`` together, watts."""
    busy_fraction: float
    """Share of the time the engine runs steps (1 in a closed loop)."""
    activity: float
    """Activity of the busy time: compute-bound time counts 1, memory-bound and collective
    time 0.35, engine overheads 0."""
    energy_per_request_j: float
    energy_per_output_token_j: float
    energy_per_million_output_tokens_kwh: float
    power_source: str
    """``datasheet-tdp`` (busy = TDP, idle = 11.5 % of it) or ``measurement:<id>`` (the
    median NVML samples of that upload)."""

    @classmethod
    def of(cls, estimate: EnergyEstimate | None) -> EnergyOut | None:
        if estimate is None:
            return None
        return cls(
            gpus=estimate.gpus,
            power_per_gpu_w=estimate.power_per_gpu_w,
            power_w=estimate.power_w,
            busy_fraction=estimate.busy_fraction,
            activity=estimate.activity,
            energy_per_request_j=estimate.energy_per_request_j,
            energy_per_output_token_j=estimate.energy_per_output_token_j,
            energy_per_million_output_tokens_kwh=estimate.energy_per_million_output_tokens_kwh,
            power_source=estimate.power_source,
        )
