"""Hardware facts: datasheet specs, device identity, upload plausibility, efficiency curves."""

from servesize.core.hardware.datasheet import datasheet_spec, profile_id_for
from servesize.core.hardware.efficiency import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_GEMM_EFFICIENCY,
    EfficiencyPoint,
    bandwidth_efficiency,
    gemm_efficiency_curves,
)
from servesize.core.hardware.identity import device_matches, identity_tokens
from servesize.core.hardware.plausibility import (
    MAX_ACHIEVED_OVER_PEAK,
    BandwidthSample,
    CollectiveSample,
    GemmSample,
    implausible_values,
)
from servesize.core.hardware.spec import PEAK_DTYPES, HardwareSpec, Interconnect

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_GEMM_EFFICIENCY",
    "MAX_ACHIEVED_OVER_PEAK",
    "PEAK_DTYPES",
    "BandwidthSample",
    "CollectiveSample",
    "EfficiencyPoint",
    "GemmSample",
    "HardwareSpec",
    "Interconnect",
    "bandwidth_efficiency",
    "datasheet_spec",
    "device_matches",
    "gemm_efficiency_curves",
    "identity_tokens",
    "implausible_values",
    "profile_id_for",
]
