"""Measured kernel tables for the step-time model: shipped H100 tables (scaled by physical
ratios to any other GPU, docs/modeling.md §2.11) and agent uploads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from servesize.calibration import load_measured_profile, tables_for_gpu
from servesize.core.energy import PowerProfile, power_profile
from servesize.core.hardware import HardwareSpec, datasheet_spec
from servesize.core.steptime import GemmTable, MeasuredProfile
from servesize.db.seed import datasheet_entries

SHIPPED_PROFILES = {"h100-sxm"}
"""Profiles whose kernel tables ship with the service (``servesize/data/h100``)."""


@lru_cache(maxsize=1)
def _shipped_h100() -> MeasuredProfile:
    return load_measured_profile()


@lru_cache(maxsize=1)
def _datasheets() -> dict[str, HardwareSpec]:
    return {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}


def scaled_tables(target: HardwareSpec) -> MeasuredProfile | None:
    """The H100 tables scaled to ``target``; a stored profile lacking the physical fields
    (SM count, L2, clock: not stored in the database) takes them from its ``gpus.json`` entry."""
    sheet = _datasheets().get(target.id)
    if sheet is not None and target.sm_count is None:
        target = replace(
            target,
            sm_count=sheet.sm_count,
            l2_cache_bytes=sheet.l2_cache_bytes,
            boost_clock_hz=sheet.boost_clock_hz,
        )
    return tables_for_gpu(target)


def gemm_tables_from_upload(payload: Mapping[str, Any], source: str) -> tuple[GemmTable, ...]:
    """One table per dtype from an upload's ``gemm`` rows (median latency per shape and M)."""
    by_dtype: dict[str, list[Mapping[str, Any]]] = {}
    for row in payload.get("gemm", []):
        by_dtype.setdefault(str(row["dtype"]), []).append(row)
    tables: list[GemmTable] = []
    for dtype, rows in sorted(by_dtype.items()):
        m_grid = sorted({int(r["m"]) for r in rows})
        shapes = sorted({(int(r["n"]), int(r["k"])) for r in rows})
        if len(m_grid) < 2:
            continue  # one M cannot describe a curve; the roofline default stays
        latency = np.full((len(shapes), len(m_grid)), np.nan)
        for r in rows:
            latency[shapes.index((int(r["n"]), int(r["k"]))), m_grid.index(int(r["m"]))] = float(
                r["latency_s"]
            )
        tables.append(
            GemmTable(
                dtype=dtype,
                engine=None,
                source=source,
                m=np.asarray(m_grid, dtype=np.float64),
                n=np.asarray([s[0] for s in shapes], dtype=np.float64),
                k=np.asarray([s[1] for s in shapes], dtype=np.float64),
                latency_s=latency,
            )
        )
    return tuple(tables)


def measured_profile(
    profile_id: str,
    uploads: Sequence[tuple[int, Mapping[str, Any]]],
    hardware: HardwareSpec | None = None,
) -> MeasuredProfile | None:
    """The tables the planner should use for ``profile_id``.

    The H100 gets its shipped tables; another profile, when its ``hardware`` spec is given,
    the H100 tables scaled to it. ``uploads`` are ``(measurement id, payload)``, newest first;
    the newest upload with GEMM rows replaces the GEMM tables of the dtypes it measured.
    """
    if profile_id in SHIPPED_PROFILES:
        base: MeasuredProfile | None = _shipped_h100()
    else:
        base = scaled_tables(hardware) if hardware is not None else None
    latest = next(((mid, p) for mid, p in uploads if p.get("gemm")), None)
    if latest is None:
        return base
    uploaded = gemm_tables_from_upload(latest[1], f"measurement:{latest[0]}")
    if not uploaded:
        return base
    measured_dtypes = {t.dtype for t in uploaded}
    if base is None:
        return MeasuredProfile(name=f"{profile_id} uploads", gemm=uploaded)
    kept = tuple(t for t in base.gemm if t.dtype not in measured_dtypes)
    return replace(base, gemm=kept + uploaded)


def measured_power(
    hardware: HardwareSpec, uploads: Sequence[tuple[int, Mapping[str, Any]]]
) -> PowerProfile | None:
    """The GPU's power profile: the median of the newest upload's ``power_samples_w`` (NVML
    board power under the GEMM probe) as the busy power and the median of its
    ``idle_power_samples_w`` as the idle power; the datasheet TDP where none was uploaded."""
    latest = next(((mid, p) for mid, p in uploads if p.get("power_samples_w")), None)
    if latest is None:
        return power_profile(hardware)
    mid, payload = latest
    idle = payload.get("idle_power_samples_w") or None
    return power_profile(
        hardware,
        measured_busy_w=float(np.median(payload["power_samples_w"])),
        measured_idle_w=None if idle is None else float(np.median(idle)),
        measurement=f"measurement:{mid}",
    )
