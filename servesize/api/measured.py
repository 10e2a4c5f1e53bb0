"""Measured kernel tables for the step-time model: shipped H100 tables and agent uploads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from servesize.calibration import load_measured_profile
from servesize.core.steptime import GemmTable, MeasuredProfile

SHIPPED_PROFILES = {"h100-sxm"}
"""Profiles whose kernel tables ship with the service (``servesize/data/h100``)."""


@lru_cache(maxsize=1)
def _shipped_h100() -> MeasuredProfile:
    return load_measured_profile()


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
    profile_id: str, uploads: Sequence[tuple[int, Mapping[str, Any]]]
) -> MeasuredProfile | None:
    """The tables the planner should use for ``profile_id``.

    ``uploads`` are ``(measurement id, payload)``, newest first; the newest upload with GEMM
    rows replaces the shipped GEMM tables of the dtypes it measured.
    """
    base = _shipped_h100() if profile_id in SHIPPED_PROFILES else None
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
