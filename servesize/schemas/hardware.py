"""Hardware-profile schemas."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from servesize.schemas.base import RequestModel, ResponseModel

PeakDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
PROFILE_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"


class InterconnectIn(RequestModel):
    """The GPU-to-GPU link inside a node."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    kind: Literal["nvlink", "pcie", "infinity_fabric", "ethernet", "none"] = Field(
        examples=["nvlink"]
    )
    """The link technology."""
    bandwidth_bytes_per_s: int | None = Field(
        default=None, gt=0, le=10**15, examples=[450_000_000_000]
    )
    """Per GPU and per direction (NVLink 4: 450 GB/s = 4.5e11). Null: unknown (collectives
    then assume PCIe, about 25 GB/s)."""
    gpus_per_node: int = Field(default=8, ge=1, le=1024, examples=[8])
    """GPUs in one node; TP × PP spreads over more only with a link between nodes
    (``inter_node``, or the default for the interconnect)."""


class InterNodeIn(RequestModel):
    """The link between nodes of a multi-node replica, per GPU and per direction."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    kind: Literal["infiniband", "ethernet", "nvlink_domain"] = Field(examples=["infiniband"])
    """``infiniband`` / ``ethernet``: a network adapter share per GPU; ``nvlink_domain``: one
    NVLink switch fabric over the nodes (GB200/GB300 NVL72)."""
    bandwidth_bytes_per_s: int = Field(gt=0, le=10**15, examples=[50_000_000_000])
    """Per GPU and direction (one 400 Gb/s NDR adapter per GPU: 5e10)."""
    latency_s: float = Field(ge=0, le=1, examples=[5e-6])
    """One message across the link (InfiniBand NDR: about 5 µs)."""
    domain_gpus: int | None = Field(default=None, ge=2, le=100_000, examples=[72])
    """GPUs of the NVLink domain (``nvlink_domain`` only; 72 for NVL72)."""

    @model_validator(mode="after")
    def _domain(self) -> InterNodeIn:
        if (self.kind == "nvlink_domain") != (self.domain_gpus is not None):
            raise ValueError("domain_gpus is required for kind nvlink_domain and only for it")
        return self


class PriceIn(RequestModel):
    per_gpu_hour: float = Field(gt=0, le=10_000)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    as_of: date
    source: str = Field(min_length=1, max_length=2000)


class HardwareProfileCreate(RequestModel):
    """A custom profile (scope ``admin``). Datasheet profiles are seeded and read-only."""

    id: str = Field(pattern=PROFILE_ID_PATTERN, examples=["h100-sxm-lab-a"])
    vendor: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=200, examples=["H100 SXM (lab A)"])
    memory_bytes: int = Field(gt=0, le=2**50)
    memory_type: str | None = Field(default=None, max_length=32)
    memory_bandwidth_bytes_per_s: int = Field(gt=0, le=10**15)
    peak_tflop_per_s: dict[PeakDtype, float | None] = Field(
        description="Dense peak per dtype in TFLOP/s (int8 in TOPS); null = unsupported."
    )
    interconnect: InterconnectIn | None = None
    inter_node: InterNodeIn | None = Field(
        default=None,
        description="The link between nodes; null: the default for the interconnect "
        "(NVLink 4+: InfiniBand NDR 400 Gb/s per GPU; none for PCIe).",
    )
    tdp_w: float | None = Field(default=None, gt=0, le=100_000)
    host_link_bytes_per_s: int | None = Field(
        default=None,
        gt=0,
        le=10**13,
        description="GPU-to-host bandwidth per direction, for KV offload (PCIe Gen5 x16: about "
        "5e10 achieved; NVLink-C2C: 4.5e11). Null: 4.5e11 for GH200/GB200/GB300, else 2.5e10.",
    )
    host_memory_bytes: int | None = Field(
        default=None, gt=0, le=2**50, description="Host memory per GPU; null: unknown."
    )
    price: PriceIn | None = None
    identity_tokens: list[str] | None = Field(
        default=None,
        description="Words a measured device name must contain; default: from `name`. "
        "An empty list accepts uploads from any device.",
    )
    source: str | None = Field(default=None, max_length=4000)
    notes: str | None = Field(default=None, max_length=4000)


class HardwareProfilePatch(RequestModel):
    """Fields to change. Datasheet profiles accept only ``price`` and ``notes``. Fields every
    profile has (``vendor``, ``name``, ``memory_bytes``, ``memory_bandwidth_bytes_per_s``,
    ``peak_tflop_per_s``) may be omitted but not set to null."""

    vendor: str | SkipJsonSchema[None] = Field(default=None, min_length=1, max_length=64)
    name: str | SkipJsonSchema[None] = Field(default=None, min_length=1, max_length=200)
    memory_bytes: int | SkipJsonSchema[None] = Field(default=None, gt=0, le=2**50)
    memory_type: str | None = Field(default=None, max_length=32)
    memory_bandwidth_bytes_per_s: int | SkipJsonSchema[None] = Field(default=None, gt=0, le=10**15)
    peak_tflop_per_s: dict[PeakDtype, float | None] | SkipJsonSchema[None] = None
    interconnect: InterconnectIn | None = None
    inter_node: InterNodeIn | None = None
    tdp_w: float | None = Field(default=None, gt=0, le=100_000)
    host_link_bytes_per_s: int | None = Field(
        default=None,
        gt=0,
        le=10**13,
        description="GPU-to-host bandwidth per direction, for KV offload (PCIe Gen5 x16: about "
        "5e10 achieved; NVLink-C2C: 4.5e11). Null: 4.5e11 for GH200/GB200/GB300, else 2.5e10.",
    )
    host_memory_bytes: int | None = Field(
        default=None, gt=0, le=2**50, description="Host memory per GPU; null: unknown."
    )
    price: PriceIn | None = None
    identity_tokens: list[str] | None = None
    source: str | None = Field(default=None, max_length=4000)
    notes: str | None = Field(default=None, max_length=4000)

    @field_validator(
        "vendor",
        "name",
        "memory_bytes",
        "memory_bandwidth_bytes_per_s",
        "peak_tflop_per_s",
        mode="before",
    )
    @classmethod
    def _not_null(cls, value: object) -> object:
        # Runs only for fields the request gives (defaults are not validated).
        if value is None:
            raise ValueError("every profile has this field: omit it to keep it, or give a value")
        return value


class InterconnectOut(ResponseModel):
    kind: str
    bandwidth_bytes_per_s: int | None
    gpus_per_node: int


class InterNodeOut(ResponseModel):
    kind: str
    bandwidth_bytes_per_s: int
    latency_s: float
    domain_gpus: int | None
    default: bool
    """True: the profile gives none and this is the documented default for its interconnect."""


class PriceOut(ResponseModel):
    per_gpu_hour: float
    currency: str
    as_of: date | None
    source: str | None


class HardwareProfileSummary(ResponseModel):
    id: str
    kind: Literal["datasheet", "custom"]
    vendor: str
    name: str
    memory_bytes: int
    memory_bandwidth_bytes_per_s: int
    peak_tflop_per_s: dict[str, float | None]
    interconnect: InterconnectOut | None
    inter_node: InterNodeOut | None = None
    price: PriceOut | None
    measurement_count: int
    version: int


class EfficiencyPointOut(ResponseModel):
    m: int
    median_efficiency: float
    best_efficiency: float
    samples: int


class SourcedValue(ResponseModel):
    """A number and where it came from: ``datasheet-default`` or ``measurement:<id>``."""

    value: float
    source: str


class Efficiencies(ResponseModel):
    """What the step-time model consumes, each number with its source."""

    gemm: dict[str, list[EfficiencyPointOut]]
    gemm_source: str
    gemm_default: SourcedValue
    memory_bandwidth: SourcedValue
    kernel_launch_overhead_s: SourcedValue | None
    collective_bus_bandwidth: list[dict[str, float | int | str]]


class MeasurementSummary(ResponseModel):
    id: int
    received_at: datetime
    measured_at: datetime
    agent_version: str
    method_version: int
    host: str
    device: str
    gpu_name: str
    gpu_uuid: str | None
    gemm_results: int
    bandwidth_results: int
    collective_results: int
    endpoint_benchmarks: int


class PowerProfileOut(ResponseModel):
    """The board power energy figures use (docs/modeling.md, "Energy and power")."""

    busy_w: float
    """Under a compute-bound load: the TDP, or the median NVML sample of an upload."""
    idle_w: float
    """With nothing running: measured, or 11.5 % of ``busy_w``."""
    source: str


class HardwareProfileOut(HardwareProfileSummary):
    memory_type: str | None
    tdp_w: float | None
    host_link_bytes_per_s: int
    """GPU-to-host bandwidth per direction KV offload loads at (the profile's, or the default)."""
    host_link_default: bool
    """True: the profile gives none and ``host_link_bytes_per_s`` is the documented default."""
    host_memory_bytes: int | None
    identity_tokens: list[str]
    source: str | None
    notes: str | None
    unverified_fields: list[str]
    created_at: datetime
    updated_at: datetime
    latest_measurement: MeasurementSummary | None
    efficiencies: Efficiencies
    power: PowerProfileOut | None = None
    """Null when the profile has neither a TDP nor uploaded power samples."""


class MeasurementOut(MeasurementSummary):
    profile_id: str
    payload: dict[str, object]
