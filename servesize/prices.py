"""The shipped reference price sheet, ``servesize/data/prices.json``: on-demand list prices per
GPU-hour by GPU and provider, each with its source page and the date read.

Precedence when a plan is costed: the request's price, then the hardware profile's, then the
sheet's cheapest row for that GPU (ties: the provider first alphabetically).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Literal

__all__ = ["PRICES_JSON", "PriceQuote", "reference_prices", "sheet_rows"]

PRICES_JSON = Path(__file__).resolve().parent / "data" / "prices.json"
PriceOrigin = Literal["request", "profile", "sheet"]


@dataclass(frozen=True, slots=True)
class PriceQuote:
    """One price per GPU-hour and where it came from."""

    usd_per_gpu_hour: float
    origin: PriceOrigin
    provider: str | None = None
    source_url: str | None = None
    as_of: date | None = None


@lru_cache(maxsize=1)
def sheet_rows() -> tuple[dict[str, object], ...]:
    """Every row of the sheet, as stored."""
    data = json.loads(PRICES_JSON.read_text())
    return tuple(data["entries"])


@lru_cache(maxsize=1)
def reference_prices() -> dict[str, PriceQuote]:
    """The cheapest row per GPU id."""
    best: dict[str, PriceQuote] = {}
    for row in sorted(sheet_rows(), key=lambda r: (str(r["gpu"]), str(r["provider"]))):
        gpu = str(row["gpu"])
        price = float(row["usd_per_gpu_hour"])  # type: ignore[arg-type]
        if gpu in best and best[gpu].usd_per_gpu_hour <= price:
            continue
        best[gpu] = PriceQuote(
            usd_per_gpu_hour=price,
            origin="sheet",
            provider=str(row["provider"]),
            source_url=str(row["source_url"]),
            as_of=date.fromisoformat(str(row["read_on"])),
        )
    return best
