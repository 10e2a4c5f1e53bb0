"""Hardware facts: datasheet specs, device identity, upload plausibility, efficiency curves."""

from servesize.core.hardware.datasheet import datasheet_spec, profile_id_for
from servesize.core.hardware.efficiency import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_GEMM_EFFICIENCY,
    EfficiencyPoint,
    bandwidth_efficiency,
    gemm_efficiency_curves,
)
from servesize.core.hardware.hostlink import (
    NVLINK_C2C_BYTES_PER_S,
    PCIE_GEN5_HOST_BYTES_PER_S,
    host_link_bandwidth,
    pcie_host_link_bytes_per_s,
)
from servesize.core.hardware.identity import device_matches, identity_tokens
from servesize.core.hardware.internode import (
    INFINIBAND_NDR,
    INTER_NODE_KINDS,
    NVL72_DOMAIN,
    default_inter_node,
    inter_node_link,
    inter_node_problem,
    nvlink_domain_gpus,
)
from servesize.core.hardware.plausibility import (
    MAX_ACHIEVED_OVER_PEAK,
    BandwidthSample,
    CollectiveSample,
    GemmSample,
    implausible_values,
)
from servesize.core.hardware.spec import PEAK_DTYPES, HardwareSpec, Interconnect, InterNodeLink

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_GEMM_EFFICIENCY",
    "INFINIBAND_NDR",
    "INTER_NODE_KINDS",
    "MAX_ACHIEVED_OVER_PEAK",
    "NVL72_DOMAIN",
    "NVLINK_C2C_BYTES_PER_S",
    "PCIE_GEN5_HOST_BYTES_PER_S",
    "PEAK_DTYPES",
    "BandwidthSample",
    "CollectiveSample",
    "EfficiencyPoint",
    "GemmSample",
    "HardwareSpec",
    "InterNodeLink",
    "Interconnect",
    "bandwidth_efficiency",
    "datasheet_spec",
    "default_inter_node",
    "device_matches",
    "gemm_efficiency_curves",
    "host_link_bandwidth",
    "identity_tokens",
    "implausible_values",
    "inter_node_link",
    "inter_node_problem",
    "nvlink_domain_gpus",
    "pcie_host_link_bytes_per_s",
    "profile_id_for",
]
