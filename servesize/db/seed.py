"""Datasheet hardware profiles, read from the reference GPU table shipped with the package."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servesize.core.hardware import HardwareSpec, datasheet_spec, identity_tokens

GPUS_JSON = Path(__file__).resolve().parent.parent / "data" / "gpus.json"


def datasheet_entries(path: Path = GPUS_JSON) -> list[dict[str, Any]]:
    """The ``gpus[]`` entries of the reference table, as written."""
    entries: list[dict[str, Any]] = json.loads(path.read_text())["gpus"]
    return entries


def datasheet_rows(path: Path = GPUS_JSON) -> list[dict[str, Any]]:
    """One ``hardware_profile`` row per ``gpus[]`` entry, units converted by the core."""
    retrieved = str(json.loads(path.read_text()).get("retrieved", ""))
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for entry in datasheet_entries(path):
        spec = datasheet_spec(entry)
        link = spec.interconnect
        unverified = list(entry.get("unverified_fields") or [])
        if entry.get("unverified"):
            unverified.insert(0, "whole entry")
        rows.append(
            {
                "id": spec.id,
                "kind": "datasheet",
                "vendor": spec.vendor,
                "name": spec.name,
                "memory_bytes": spec.memory_bytes,
                "memory_type": spec.memory_type,
                "memory_bandwidth_bytes_per_s": spec.memory_bandwidth_bytes_per_s,
                "peak_tflop_per_s": dict(spec.peak_tflop_per_s),
                "interconnect_kind": link.kind if link else None,
                "interconnect_bandwidth_bytes_per_s": link.bandwidth_bytes_per_s if link else None,
                "gpus_per_node": link.gpus_per_node if link else 8,
                # Not a column before migration 2026_12_02_inter_node (0003 ignores the key).
                "inter_node": _inter_node_json(spec),
                "tdp_w": spec.tdp_w,
                # Not columns before migration 2026_12_03_host_link.
                "host_link_bytes_per_s": spec.host_link_bytes_per_s,
                "host_memory_bytes": None,
                "price_per_gpu_hour": None,
                "price_currency": None,
                "price_as_of": None,
                "price_source": None,
                "identity_tokens": list(identity_tokens(spec.name)),
                "source": "; ".join(entry.get("sources") or []) + f" (retrieved {retrieved})",
                "notes": entry.get("notes"),
                "unverified_fields": unverified,
                "created_at": now,
                "updated_at": now,
                "version": 1,
            }
        )
    return rows


def _inter_node_json(spec: HardwareSpec) -> dict[str, Any] | None:
    link = spec.inter_node
    if link is None:
        return None
    return {
        "kind": link.kind,
        "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
        "latency_s": link.latency_s,
        "domain_gpus": link.domain_gpus,
    }


def datasheet_inter_nodes(path: Path = GPUS_JSON) -> dict[str, dict[str, Any]]:
    """The ``inter_node`` column of the datasheet profiles whose entry sets one (the NVL72
    parts' NVLink domain); the others keep NULL, the default for their interconnect."""
    links: dict[str, dict[str, Any]] = {}
    for entry in datasheet_entries(path):
        spec = datasheet_spec(entry)
        link = _inter_node_json(spec)
        if link is not None:
            links[spec.id] = link
    return links


def datasheet_host_links(path: Path = GPUS_JSON) -> dict[str, int]:
    """The ``host_link_bytes_per_s`` of the datasheet profiles whose entry gives a PCIe
    generation or an NVLink-C2C part (``core.hardware.datasheet``)."""
    links: dict[str, int] = {}
    for entry in datasheet_entries(path):
        spec = datasheet_spec(entry)
        if spec.host_link_bytes_per_s is not None:
            links[spec.id] = spec.host_link_bytes_per_s
    return links
